package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// chart draws every comparison as bars on one logarithmic axis of time
// relative to each group's reference (1 = as fast as the reference; left
// is faster), with whiskers from the fastest to the slowest run and the
// target, where there is one, as a mark.
func chart(r *results, cs []comparison) string {
	const (
		width   = 960
		labelW  = 150
		valueW  = 190
		rowH    = 20
		groupH  = 26
		top     = 64
		bottomH = 56
	)
	plotL, plotR := float64(labelW+10), float64(width-valueW-10)
	lo, hi := 0.1, 10.0
	x := func(v float64) float64 {
		v = math.Min(math.Max(v, lo), hi)
		return plotL + (math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*(plotR-plotL)
	}

	height := top + bottomH
	for _, c := range cs {
		height += groupH + rowH*(1+len(c.Impls))
	}

	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...); b.WriteByte('\n') }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`, width, height, width, height)
	p(`<rect width="100%%" height="100%%" fill="#ffffff"/>`)
	p(`<text x="%d" y="22" font-size="16" font-weight="bold">carmy against the floor, go-sdk, mcp-go and net/http: time per call relative to each group's reference</text>`, 10)
	p(`<text x="%d" y="40" fill="#555">Bars: median of the rounds' ratios (each round measures a group side by side); whiskers: the lowest and highest ratio. Log scale. ▲ marks the target.</text>`, 10)

	// Grid.
	y0, y1 := float64(top), float64(height-bottomH+6)
	for _, g := range []float64{0.1, 0.25, 0.5, 1, 2, 4, 10} {
		stroke, dash := "#dddddd", ` stroke-dasharray="3,3"`
		if g == 1 {
			stroke, dash = "#888888", ""
		}
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"%s/>`, x(g), y0, x(g), y1, stroke, dash)
		p(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s×</text>`, x(g), y1+16, trimFloat(g))
	}
	p(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">time relative to the reference (lower is faster)</text>`, (plotL+plotR)/2, y1+34)

	y := float64(top)
	for _, c := range cs {
		y += groupH
		p(`<text x="10" y="%.1f" font-weight="bold">%s</text>`, y-8, html.EscapeString(c.Title))
		if c.Note != "" {
			p(`<text x="%.1f" y="%.1f" fill="#777" font-size="11">%s</text>`, plotL+220, y-8, html.EscapeString(c.Note))
		}
		impls := append([]string{c.Ref}, c.Impls...)
		for _, impl := range impls {
			cy := y + rowH/2
			p(`<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`, labelW, cy, html.EscapeString(impl))
			st, ok := r.stat(c.name(impl), c.Unit)
			if !ok {
				y += rowH
				continue
			}
			value := formatValue(st.median, c.Unit)
			if impl == c.Ref {
				p(`<circle cx="%.1f" cy="%.1f" r="4" fill="#444"/>`, x(1), cy)
				p(`<text x="%d" y="%.1f" dominant-baseline="middle" fill="#333">%s (reference)</text>`, width-valueW, cy, value)
				y += rowH
				continue
			}
			tr := r.timeRatio(c, impl, c.Ref)
			color := "#8aa4c8"
			if strings.HasPrefix(impl, "carmy") {
				color = "#2b6cb0"
			}
			// A bar held to targets is green when it meets them all,
			// orange when it misses one; a target against the reference
			// is marked on the axis.
			var marks []float64
			held, met := false, true
			for _, t := range c.Targets {
				if t.Impl != impl {
					continue
				}
				held, met = true, met && r.verdict(c, t).met
				switch {
				case t.ref(c) != c.Ref:
				case t.Min > 0:
					marks = append(marks, 1/t.Min)
				default:
					marks = append(marks, t.Max)
				}
			}
			if held && met {
				color = "#2f855a"
			} else if held {
				color = "#c05621"
			}
			x1, x2 := x(1), x(tr.value)
			if x2 < x1 {
				x1, x2 = x2, x1
			}
			p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="%s"/>`, x1, cy-6, math.Max(x2-x1, 1), 12, color)
			p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#222"/>`, x(tr.lo), cy, x(tr.hi), cy)
			p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#222"/>`, x(tr.lo), cy-4, x(tr.lo), cy+4)
			p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#222"/>`, x(tr.hi), cy-4, x(tr.hi), cy+4)
			for _, tv := range marks {
				p(`<path d="M %.1f %.1f l -5 8 l 10 0 z" fill="#c53030"/>`, x(tv), cy+2)
			}
			p(`<text x="%d" y="%.1f" dominant-baseline="middle" fill="#333">%s · %s×</text>`, width-valueW, cy, value, trimFloat(round3(tr.value)))
			y += rowH
		}
	}
	p(`</svg>`)
	return b.String()
}

func round3(v float64) float64 {
	if v == 0 {
		return 0
	}
	d := math.Pow(10, 2-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*d) / d
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%g", v)
	return s
}
