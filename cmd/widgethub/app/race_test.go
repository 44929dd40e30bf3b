//go:build race

package app_test

// raceDetector tells that the tests run under the race detector, which
// slows every goroutine several times over: latency is asserted in make
// test's run without it (see latencyAsserted).
const raceDetector = true
