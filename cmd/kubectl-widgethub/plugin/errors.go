package plugin

import (
	"errors"
	"fmt"
)

// Exit codes of Run. Scripts can tell the failures apart by them.
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitError: any other failure (API errors, forbidden, timeouts while writing).
	ExitError = 1
	// ExitUsage: bad arguments or flags, including a cluster name that is not a DNS-1123 label.
	ExitUsage = 2
	// ExitKubeconfig: a kubeconfig cannot be read, or names no such context.
	ExitKubeconfig = 3
	// ExitUnreachable: the hub's or the member's API server does not answer.
	ExitUnreachable = 4
	// ExitExists: the member is already registered (pass --overwrite to replace it).
	ExitExists = 5
	// ExitNotFound: no registration of that name.
	ExitNotFound = 6
	// ExitConflict: objects join would install exist in the member and join
	// did not create them (pass --adopt to take them over), or the hub's Secret
	// NAME is not a registration (join never replaces it, unjoin never
	// deletes it).
	ExitConflict = 7
)

// exitError is an error with the exit code Run returns for it.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withCode returns err with an exit code.
func withCode(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

// exitCode is the exit code for err: its own, or ExitError.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return ExitError
}
