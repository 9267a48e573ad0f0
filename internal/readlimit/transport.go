package readlimit

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// Apply makes every request made with cfg, and with every client built from it (client-go's,
// controller-runtime's, Helm's: they all take cfg's transport wrappers), go through Wrap(l).
func Apply(cfg *rest.Config, l Limits) { cfg.Wrap(Wrap(l)) }

// Wrap returns a transport wrapper (rest.Config.Wrap) that applies l's response caps.
//
// A rest.Config's wrappers sit right above Go's http.Transport (client-go's
// transport.HTTPWrappersForConfig applies WrapTransport first), so the body this wrapper reads is
// the one Go's transport hands over: when the transport asked for gzip (it does unless
// DisableCompression is set) and the server answered Content-Encoding: gzip, that body is
// already decompressed (net/http: Response.Uncompressed), and the decompressed bytes are what is
// counted. A server that sends gzip although nobody asked gets its compressed bytes counted as
// they are, and client-go cannot decode them (it never gunzips by itself).
//
// A response is read whole here, before client-go sees a byte: at most MaxResponseBytes (plus
// one, to tell "exactly the cap" from "more"), its JSON array elements counted up to
// MaxResponseElements. Over a cap, the round trip fails with an *Error, and client-go, which
// would otherwise read the whole body into memory (rest.Request.transformResponse: io.ReadAll)
// and decode it, never gets it. Responses in protobuf, CBOR or YAML are refused unless the
// request's Accept named that encoding: client-go decodes any encoding its scheme knows,
// whatever it asked for, and those would slip past the JSON element count. Watches and upgraded
// connections (101 Switching Protocols) are streams: they are counted as they are read, and fail
// at the read that passes a cap. No target is watched today.
func Wrap(l Limits) transport.WrapperFunc {
	l = l.WithDefaults()
	return func(rt http.RoundTripper) http.RoundTripper { return &capped{next: rt, limits: l} }
}

type capped struct {
	next   http.RoundTripper
	limits Limits
}

func (c *capped) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil || resp.Body == nil || resp.Body == http.NoBody {
		return resp, err
	}
	subject := "response to " + req.Method + " " + pathOf(req)
	mediaType := mediaTypeOf(resp.Header.Get("Content-Type"))
	if refusedEncoding(mediaType) && !accepted(req, mediaType) {
		_ = resp.Body.Close()
		return nil, &Error{Subject: subject, Detail: fmt.Sprintf("came in %s, which the request did not ask for", mediaType)}
	}
	var s *scanner
	if isJSON(mediaType) {
		s = &scanner{subject: subject, max: c.limits.MaxResponseElements}
	}
	if streaming(req, resp) {
		b := &streamBody{rc: resp.Body, left: c.limits.MaxResponseBytes, max: c.limits.MaxResponseBytes, subject: subject, scanner: s}
		if rw, ok := resp.Body.(io.ReadWriteCloser); ok {
			resp.Body = &streamRWBody{streamBody: b, w: rw}
		} else {
			resp.Body = b
		}
		return resp, nil
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.ContentLength > c.limits.MaxResponseBytes {
		return nil, &Error{Subject: subject, Limit: bytesLimit(c.limits.MaxResponseBytes)}
	}
	var buf bytes.Buffer
	if resp.ContentLength > 0 {
		buf.Grow(int(resp.ContentLength))
	}
	n, err := buf.ReadFrom(io.LimitReader(resp.Body, c.limits.MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("failed to read the %s: %w", subject, err)
	}
	if n > c.limits.MaxResponseBytes {
		return nil, &Error{Subject: subject, Limit: bytesLimit(c.limits.MaxResponseBytes)}
	}
	if s != nil {
		if err := s.scan(buf.Bytes()); err != nil {
			return nil, err
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(buf.Bytes()))
	resp.ContentLength = n
	return resp, nil
}

// pathOf is the request's path, without its query (a continue token is the server's text),
// shortened to 120 bytes.
func pathOf(req *http.Request) string {
	p := req.URL.Path
	if len(p) > 120 {
		p = p[:120] + "..."
	}
	return p
}

// mediaTypeOf returns the media type of a Content-Type header, lowercased; "" when absent or not
// parseable.
func mediaTypeOf(contentType string) string {
	if contentType == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	return mt
}

// isJSON reports whether client-go decodes a body of media type mt as JSON: JSON, and no
// Content-Type at all (client-go then decodes with its configured content type, JSON for every
// target client).
func isJSON(mt string) bool {
	return mt == "" || mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// refusedEncoding reports whether mt is an encoding client-go would decode that the JSON element
// count cannot see into: protobuf, CBOR, YAML.
func refusedEncoding(mt string) bool {
	return strings.Contains(mt, "protobuf") || mt == "application/cbor" || strings.HasSuffix(mt, "+cbor") ||
		mt == "application/yaml" || mt == "application/x-yaml" || mt == "text/yaml" || strings.HasSuffix(mt, "+yaml")
}

// accepted reports whether the request's Accept header names mt.
func accepted(req *http.Request, mt string) bool {
	for _, h := range req.Header.Values("Accept") {
		for _, part := range strings.Split(h, ",") {
			if mediaTypeOf(strings.TrimSpace(part)) == mt {
				return true
			}
		}
	}
	return false
}

// streaming reports whether the response is a stream, read as it comes: a watch, a followed
// log, or an upgraded connection.
func streaming(req *http.Request, resp *http.Response) bool {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return true
	}
	q := req.URL.Query()
	return q.Get("watch") == "true" || q.Get("watch") == "1" || q.Get("follow") == "true" || strings.Contains(req.URL.Path, "/watch/")
}

// streamBody counts a stream's bytes and JSON array elements as they are read.
type streamBody struct {
	rc      io.ReadCloser
	left    int64 // bytes still allowed
	max     int64
	subject string
	scanner *scanner // nil: not JSON
	err     error
}

func (b *streamBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	// One byte past the cap is read to tell "exactly the cap" from "more".
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	if b.left -= int64(n); b.left < 0 {
		b.err = &Error{Subject: b.subject, Limit: bytesLimit(b.max)}
		return 0, b.err
	}
	if b.scanner != nil && n > 0 {
		if serr := b.scanner.scan(p[:n]); serr != nil {
			b.err = serr
			return 0, serr
		}
	}
	return n, err
}

func (b *streamBody) Close() error { return b.rc.Close() }

// streamRWBody keeps an upgraded connection writable.
type streamRWBody struct {
	*streamBody
	w io.Writer
}

func (b *streamRWBody) Write(p []byte) (int, error) { return b.w.Write(p) }
