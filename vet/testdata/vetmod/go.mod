module example.com/vetmod

go 1.26.0

require github.com/carmy-dev/carmy v0.0.0-00010101000000-000000000000

replace github.com/carmy-dev/carmy => ../../../..
