package clusters

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// answerAtCancel is a transport whose answer races the request's end: it
// waits for the request's context to end and then answers 200 with an empty
// body, as net/http's transport does when a stuck server answers the moment
// the client closes the connection.
type answerAtCancel struct{ closed bool }

func (a *answerAtCancel) RoundTrip(req *http.Request) (*http.Response, error) {
	<-req.Context().Done()
	return &http.Response{StatusCode: http.StatusOK, Body: &closeRecorder{Reader: strings.NewReader(""), closed: &a.closed}, Request: req}, nil
}

type closeRecorder struct {
	io.Reader
	closed *bool
}

func (c *closeRecorder) Close() error { *c.closed = true; return nil }

// An answer that arrives as the deadline passes is not the answer to the
// request: the request failed by its deadline, and the answer's body is closed.
func TestDeadlineWinsOverAnAnswerRacingIt(t *testing.T) {
	next := &answerAtCancel{}
	d := &deadline{timeout: 50 * time.Millisecond, next: next}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://member.example/version", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := d.RoundTrip(req)
	if !errors.Is(err, context.DeadlineExceeded) || resp != nil {
		t.Fatalf("RoundTrip = %v, %v; want no answer and a deadline error", resp, err)
	}
	if !next.closed {
		t.Fatal("the discarded answer's body was left open")
	}
}
