package connect

import (
	"errors"
	"strings"
)

// The items of a list answer are counted as its bytes arrive, before
// client-go decodes them: decoding makes a struct of every item, so 4 MiB of
// empty items ("{}", or a 2-byte protobuf message) would become about 1.4
// million objects, 1.9 GiB of Deployments. Only the list's own items are
// counted; the arrays inside an object are not.

// errNotCountable is wrapped when a protobuf answer is not the envelope an
// API server sends, so that its items cannot be counted.
var errNotCountable = errors.New("a protobuf answer that is not an API server's")

// jsonItems counts the elements of the arrays that are the values of a
// top-level "items" key (as a decoder would match it: case aside, and any key
// with an escape counted as one).
type jsonItems struct {
	items            int64
	depth            int
	inString, escape bool
	// At depth 1: whether a key comes next, the key under way (its first
	// bytes) and whether it holds an escape, and whether the value after the
	// last key belongs to "items".
	expectKey, inKey, keyEscaped, itemsValue bool
	key                                      []byte
	// At depth 2: whether it is an items array, and whether a value starts
	// an item.
	inItems, expectItem bool
}

// count scans p and returns the items so far.
func (s *jsonItems) count(p []byte) (int64, error) {
	for _, c := range p {
		if s.inString {
			switch {
			case s.escape:
				s.escape = false
			case c == '\\':
				s.escape, s.keyEscaped = true, s.keyEscaped || s.inKey
			case c == '"':
				s.inString, s.inKey = false, false
			case s.inKey && len(s.key) <= len("items"):
				s.key = append(s.key, c)
			}
			continue
		}
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		if s.depth == 2 && s.expectItem && c != ']' {
			s.items++
			s.expectItem = false
		}
		switch c {
		case '"':
			s.inString = true
			if s.depth == 1 && s.expectKey {
				s.inKey, s.key, s.keyEscaped = true, s.key[:0], false
			}
		case '{', '[':
			s.depth++
			switch s.depth {
			case 1:
				s.expectKey = c == '{'
			case 2:
				s.inItems = c == '[' && s.itemsValue
				s.expectItem = s.inItems
			}
		case '}', ']':
			if s.depth == 2 {
				s.inItems, s.expectItem = false, false
			}
			s.depth--
		case ',':
			switch s.depth {
			case 1:
				s.expectKey = true
			case 2:
				s.expectItem = s.inItems
			}
		case ':':
			if s.depth == 1 {
				s.expectKey = false
				s.itemsValue = s.keyEscaped || strings.EqualFold(string(s.key), "items")
			}
		}
	}
	return s.items, nil
}

// protoItems counts the items of a Kubernetes protobuf answer: after the
// "k8s\x00" prefix, a runtime.Unknown whose field 2 (raw) holds the object,
// in which a list's items are field 2 (a single object's field 2, its spec,
// counts one). It walks the wire format without decoding anything.
type protoItems struct {
	items int64
	magic int
	// inRaw is whether the walk is inside raw, with rawLeft bytes of it to go.
	inRaw   bool
	rawLeft int64
	skip    int64
	// The varint under way, and what it is: a tag, a value or a length.
	v     uint64
	shift uint
	want  int
	field uint64
}

const (
	wantTag = iota
	wantValue
	wantLength
)

const protobufMagic = "k8s\x00"

// count scans p and returns the items so far.
func (s *protoItems) count(p []byte) (int64, error) {
	for i := 0; i < len(p); {
		if s.magic < len(protobufMagic) {
			if p[i] != protobufMagic[s.magic] {
				return s.items, errNotCountable
			}
			s.magic++
			i++
			continue
		}
		if s.skip > 0 {
			n := min(s.skip, int64(len(p)-i))
			s.skip -= n
			i += int(n)
			s.spent(n)
			continue
		}
		c := p[i]
		i++
		s.spent(1)
		s.v |= uint64(c&0x7f) << s.shift
		if c&0x80 != 0 {
			if s.shift += 7; s.shift >= 64 {
				return s.items, errNotCountable
			}
			continue
		}
		v := s.v
		s.v, s.shift = 0, 0
		switch s.want {
		case wantTag:
			s.field = v >> 3
			switch v & 7 {
			case 0:
				s.want = wantValue
			case 1:
				s.skip = 8
			case 2:
				s.want = wantLength
			case 5:
				s.skip = 4
			default: // groups: an API server sends none
				return s.items, errNotCountable
			}
		case wantValue:
			s.want = wantTag
		case wantLength:
			s.want = wantTag
			if v > 1<<40 {
				return s.items, errNotCountable
			}
			switch {
			case !s.inRaw && s.field == 2:
				s.inRaw, s.rawLeft = true, int64(v)
			case s.inRaw && s.field == 2:
				s.items++
				s.skip = int64(v)
			default:
				s.skip = int64(v)
			}
		}
		s.spent(0)
	}
	return s.items, nil
}

// spent counts n bytes of raw read, and leaves raw once it is all read.
func (s *protoItems) spent(n int64) {
	if !s.inRaw {
		return
	}
	s.rawLeft -= n
	if s.rawLeft <= 0 && s.skip == 0 && s.want == wantTag && s.shift == 0 {
		s.inRaw = false
	}
}
