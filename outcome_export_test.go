package carmy

// EncodeValue exposes the output encoder to the benchmarks of package
// carmy_test.
var EncodeValue = encodeValue
