//go:build !race

package app_test

// raceDetector tells that the tests run under the race detector.
const raceDetector = false
