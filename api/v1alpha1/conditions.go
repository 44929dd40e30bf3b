package v1alpha1

// TruncateMessage makes msg a condition's or an Event's message:
// Printable, within MaxMessageLength bytes.
func TruncateMessage(msg string) string { return Printable(msg, MaxMessageLength) }
