package connect

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// A watch stream is bounded per event, not in total: many events, each
// within the bound, pass whatever their sum; one event past it fails, also
// when its braces hide in strings.
func TestEventBoundCountsEachEvent(t *testing.T) {
	const limit = 64
	event := `{"type":"ADDED","object":{"s":"}]\"{"}}` + "\n"
	big := `{"type":"ADDED","object":{"s":"` + strings.Repeat(`}\"`, limit) + `"}}`
	frame := func(n int) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(n))
		return append(b, bytes.Repeat([]byte{7}, n)...)
	}
	for _, tc := range []struct {
		name, contentType string
		stream            []byte
		tooLarge          bool
	}{
		{"json events summing past the bound", "application/json", []byte(strings.Repeat(event, 100)), false},
		{"one json event past the bound", "application/json", []byte(event + big + event), true},
		{"an endless json value", "application/json", []byte(`{"a":[` + strings.Repeat(`1,`, limit)), true},
		{"endless whitespace", "application/json", bytes.Repeat([]byte(" "), 2*limit), true},
		{"protobuf frames summing past the bound", "application/vnd.kubernetes.protobuf;stream=watch", bytes.Repeat(frame(limit), 10), false},
		{"one protobuf frame past the bound", "application/vnd.kubernetes.protobuf;stream=watch", append(frame(limit), frame(limit+1)...), true},
		// client-go reads media types as mime does, case aside.
		{"protobuf frames, the media type in capitals", "Application/Vnd.Kubernetes.Protobuf; stream=watch", bytes.Repeat(frame(limit), 10), false},
		{"one protobuf frame past the bound, in capitals", "Application/Vnd.Kubernetes.Protobuf;stream=watch", append(frame(limit), frame(limit+1)...), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := newEventBound(io.NopCloser(&oneByteAtATime{data: tc.stream}), tc.contentType, limit)
			read, err := io.ReadAll(body)
			switch {
			case tc.tooLarge && !errors.Is(err, ErrResponseTooLarge):
				t.Fatalf("read %d bytes, err %v; want ErrResponseTooLarge", len(read), err)
			case !tc.tooLarge && err != nil:
				t.Fatalf("read %d bytes, err %v; want the whole stream", len(read), err)
			case !tc.tooLarge && !bytes.Equal(read, tc.stream):
				t.Fatalf("read %d bytes, want the %d of the stream", len(read), len(tc.stream))
			}
		})
	}
}

// oneByteAtATime reads in small, uneven pieces, as a network does.
type oneByteAtATime struct {
	data []byte
	i    int
}

func (o *oneByteAtATime) Read(p []byte) (int, error) {
	if len(o.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), 1+o.i%7, len(o.data))
	o.i++
	copy(p, o.data[:n])
	o.data = o.data[n:]
	return n, nil
}

// A body is read up to its bound and not a byte further.
func TestBoundedBodyStopsAtTheBound(t *testing.T) {
	src := &countingReader{}
	b := &boundedBody{rc: src, left: 1000, limit: 1000}
	n, err := io.Copy(io.Discard, b)
	if !errors.Is(err, ErrResponseTooLarge) || n != 1000 {
		t.Fatalf("copied %d, %v; want 1000 bytes and ErrResponseTooLarge", n, err)
	}
	if src.read > 1001 || !src.closed {
		t.Fatalf("the body was read to %d bytes and closed=%v; want at most 1001 and closed", src.read, src.closed)
	}
}

// countingReader is an endless body.
type countingReader struct {
	read   int
	closed bool
}

func (c *countingReader) Read(p []byte) (int, error) { c.read += len(p); return len(p), nil }
func (c *countingReader) Close() error               { c.closed = true; return nil }

func TestIsRedirect(t *testing.T) {
	for code, want := range map[int]bool{200: false, 300: true, 301: true, 302: true, 303: true, 304: false, 307: true, 308: true, 400: false} {
		if got := isRedirect(code); got != want {
			t.Errorf("isRedirect(%d) = %v, want %v", code, got, want)
		}
	}
}

// recordingTransport answers 200 and remembers that it was asked.
type recordingTransport struct{ asked int }

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.asked++
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}

// Through a proxy the dialer sees only the proxy's address: the guard
// checks the member's own host before the request leaves, and refuses a
// metadata address, literal or named in a URL, unless link-local members
// are allowed.
func TestProxiedRequestsToRefusedDestinations(t *testing.T) {
	viaProxy := func(*http.Request) (*url.URL, error) { return url.Parse("http://proxy.example:3128") }
	for _, tc := range []struct {
		host           string
		proxy          func(*http.Request) (*url.URL, error)
		allowLinkLocal bool
		refused        bool
	}{
		{"169.254.169.254", viaProxy, false, true},
		{"[fd00:ec2::254]", viaProxy, false, true},
		{"169.254.169.254", viaProxy, true, false},
		{"169.254.169.254", nil, false, false}, // no proxy: the dialer checks it
		{"127.0.0.1:6443", viaProxy, false, false},
		{"localhost:6443", viaProxy, false, false},
	} {
		next := &recordingTransport{}
		g := &answerGuard{maxBytes: 1 << 10, proxy: tc.proxy, allowLinkLocal: tc.allowLinkLocal, next: next}
		req, err := http.NewRequest(http.MethodGet, "https://"+tc.host+"/version", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = g.RoundTrip(req)
		if refused := errors.Is(err, ErrDestinationRefused); refused != tc.refused || (next.asked > 0) == tc.refused {
			t.Errorf("%s (proxy %v, allowLinkLocal %v): err %v, sent %d; want refused=%v", tc.host, tc.proxy != nil, tc.allowLinkLocal, err, next.asked, tc.refused)
		}
	}
}

// An answer with 10,000 warnings reaches client-go's handler with the first
// MaxWarnings of them and one that says how many were left out; one with a
// few keeps them as they are.
func TestAnswersWarningsAreBounded(t *testing.T) {
	for _, tc := range []struct{ sent, want int }{{3, 3}, {MaxWarnings, MaxWarnings}, {10000, MaxWarnings + 1}} {
		var line strings.Builder
		for i := range tc.sent {
			if i > 0 {
				line.WriteString(", ")
			}
			fmt.Fprintf(&line, `299 - "warning %d"`, i)
		}
		g := &answerGuard{next: roundTripFunc(func(req *http.Request) (*http.Response, error) {
			h := http.Header{}
			h.Add("Warning", line.String())
			return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
		})}
		req, _ := http.NewRequest(http.MethodGet, "https://member.example/version", nil)
		resp, err := g.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := utilnet.ParseWarningHeaders(resp.Header.Values("Warning"))
		if len(got) != tc.want || got[0].Text != "warning 0" {
			t.Fatalf("%d warnings sent: %d reach the handler, the first %q; want %d, the first \"warning 0\"", tc.sent, len(got), got[0].Text, tc.want)
		}
		if tc.sent > MaxWarnings && got[MaxWarnings].Text != fmt.Sprintf("%d more warnings of this answer left out", tc.sent-MaxWarnings) {
			t.Errorf("the last warning is %q, want how many were left out", got[MaxWarnings].Text)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
