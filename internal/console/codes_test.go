package console

import (
	"testing"
	"time"
)

func TestCodes(t *testing.T) {
	t.Run("once", func(t *testing.T) {
		var c Codes
		a, b := c.Mint(), c.Mint()
		if a == b || len(a) < 32 {
			t.Fatalf("codes %q and %q: want two long, different ones", a, b)
		}
		if !c.Redeem(a) || c.Redeem(a) {
			t.Fatal("want the first use to count and the second refused")
		}
		if c.Redeem("") || c.Redeem(a[:len(a)-1]) || !c.Redeem(b) {
			t.Fatal("want an unknown code refused, and the other code good")
		}
	})
	t.Run("late", func(t *testing.T) {
		c := Codes{TTL: 20 * time.Millisecond}
		a := c.Mint()
		time.Sleep(40 * time.Millisecond)
		if c.Redeem(a) {
			t.Fatal("want a code refused after its time to live")
		}
	})
	t.Run("bounded", func(t *testing.T) {
		var c Codes
		first := c.Mint()
		for range maxCodes {
			c.Mint()
		}
		if len(c.codes) != maxCodes || c.Redeem(first) {
			t.Fatalf("%d codes kept, the oldest still good; want at most %d, the oldest gone", len(c.codes), maxCodes)
		}
	})
}
