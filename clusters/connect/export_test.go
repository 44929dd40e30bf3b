package connect

// RefuseHostVia is refuseHost asking resolver r, for the tests of names
// that resolve to refused addresses (dial_names_test.go).
var RefuseHostVia = refuseHostVia
