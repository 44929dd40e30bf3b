package v1alpha1

// PrintableError keeps err, which may quote a member, for errors.Is and
// errors.As, but shows its message printable and bounded (TruncateMessage)
// wherever it is printed: a reconciler returns it, and controller-runtime
// logs it. It returns nil for nil.
func PrintableError(err error) error {
	if err == nil {
		return nil
	}
	return printableError{err}
}

type printableError struct{ err error }

func (e printableError) Error() string { return TruncateMessage(e.err.Error()) }
func (e printableError) Unwrap() error { return e.err }
