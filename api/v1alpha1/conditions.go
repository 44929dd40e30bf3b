package v1alpha1

import "unicode/utf8"

// MaxMessageLength bounds the message of every condition and Event widgethub
// writes, whatever a kubeconfig or a member's answer holds.
const MaxMessageLength = 1024

// TruncateMessage cuts msg to at most MaxMessageLength bytes, on a rune
// boundary, marking the cut with "...".
func TruncateMessage(msg string) string {
	if len(msg) <= MaxMessageLength {
		return msg
	}
	cut := MaxMessageLength - len("...")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "..."
}
