package tracking

import (
	"bufio"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
)

// eventFramer splits a watch stream into its events as apimachinery's JSON
// framer does (one JSON value after another), but without parsing them:
// that framer reads each event with encoding/json, whose 10,000 levels the
// event of an object 10,000 levels deep exceeds by one, which ended the
// watch for every object of the kind. What a frame holds is checked by
// the event decoder (splitEvent, else apimachinery's).
type eventFramer struct{ runtime.Framer }

func (f eventFramer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &frameReader{r: r, in: bufio.NewReaderSize(r, 32<<10)}
}

// frameReader returns one JSON value per Read, as apimachinery's
// jsonFrameReader: a frame longer than the caller's buffer comes in parts,
// each but the last with io.ErrShortBuffer.
type frameReader struct {
	r         io.ReadCloser
	in        *bufio.Reader
	frame     []byte
	remaining []byte
}

func (r *frameReader) Read(data []byte) (int, error) {
	if len(r.remaining) == 0 {
		frame, err := r.next()
		if err != nil {
			return 0, err
		}
		r.remaining = frame
	}
	n := copy(data, r.remaining)
	r.remaining = r.remaining[n:]
	if len(r.remaining) > 0 {
		return n, io.ErrShortBuffer
	}
	return n, nil
}

func (r *frameReader) Close() error { return r.r.Close() }

// next reads the next JSON value: its bytes from the first that is not
// space to the end of the value. Objects and arrays end where their
// brackets balance (strings and escapes skipped), however deep; anything
// else ends before the next space or bracket. io.EOF: no value left;
// io.ErrUnexpectedEOF: the stream ends inside one.
func (r *frameReader) next() ([]byte, error) {
	r.frame = r.frame[:0]
	c, err := r.skipSpace()
	if err != nil {
		return nil, err
	}
	r.frame = append(r.frame, c)
	if c != '{' && c != '[' {
		return r.scalar(c)
	}
	depth, inString, escaped := 1, false, false
	for depth > 0 {
		// What is buffered, scanned in place.
		if _, err := r.in.Peek(1); err != nil {
			return nil, unexpected(err)
		}
		chunk, _ := r.in.Peek(r.in.Buffered())
		i := 0
		for ; i < len(chunk) && depth > 0; i++ {
			c := chunk[i]
			switch {
			case inString:
				switch {
				case escaped:
					escaped = false
				case c == '\\':
					escaped = true
				case c == '"':
					inString = false
				}
			case c == '"':
				inString = true
			case c == '{' || c == '[':
				depth++
			case c == '}' || c == ']':
				depth--
			}
		}
		r.frame = append(r.frame, chunk[:i]...)
		_, _ = r.in.Discard(i)
	}
	return r.frame, nil
}

func (r *frameReader) skipSpace() (byte, error) {
	for {
		c, err := r.in.ReadByte()
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c, nil
	}
}

// scalar reads the rest of a value that is not an object or an array (a
// watch stream holds none: the event decoder refuses it).
func (r *frameReader) scalar(first byte) ([]byte, error) {
	inString, escaped := first == '"', false
	for {
		c, err := r.in.ReadByte()
		if err == io.EOF && !inString {
			return r.frame, nil
		}
		if err != nil {
			return nil, unexpected(err)
		}
		switch {
		case inString:
			r.frame = append(r.frame, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				return r.frame, nil
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '{' || c == '[' || c == '"':
			_ = r.in.UnreadByte()
			return r.frame, nil
		default:
			r.frame = append(r.frame, c)
		}
	}
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
