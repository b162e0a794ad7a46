package canon

import "testing"

func TestUnsignZeros(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"a":-0}`, `{"a":0}`},
		{`{"a":-0.0,"b":[-0e5, -0.000E-3],"c":"-0"}`, `{"a":0,"b":[0, 0],"c":"-0"}`},
		{`-0`, `0`},
		{`{"a":-0.5,"b":-10,"c":0}`, `{"a":-0.5,"b":-10,"c":0}`},
		{`{"-0":1}`, `{"-0":1}`},
		{`{"a":1}`, `{"a":1}`},
	}
	for _, tt := range tests {
		if got := string(UnsignZeros([]byte(tt.in))); got != tt.want {
			t.Errorf("UnsignZeros(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
