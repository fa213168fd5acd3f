// A stdlib-only Go connector: no requirements, so it builds offline (GOPROXY=off).
module aileron.test/connectors/go

go 1.22
