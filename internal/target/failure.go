package target

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
)

// FailureClass names the kind of failure err is, for a tenant-visible message about a target
// that did not answer: never the error's text, which can carry the address a name resolved to
// (an internal one, for a name the tenant chose) or the platform's own details. One of
// "connection refused", "connection reset", "timed out", "host name did not resolve", "TLS
// handshake failed" (the server's certificate is not trusted, or no TLS was spoken), "network
// unreachable", or "no answer" for anything else.
func FailureClass(err error) string {
	var dns *net.DNSError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var record tls.RecordHeaderError
	var certVerify *tls.CertificateVerificationError
	var alert tls.AlertError
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH):
		return "network unreachable"
	case errors.As(err, &dns):
		return "host name did not resolve"
	case errors.As(err, &unknownAuthority), errors.As(err, &hostname), errors.As(err, &invalid),
		errors.As(err, &certVerify), errors.As(err, &record), errors.As(err, &alert):
		return "TLS handshake failed"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return "timed out"
	case err != nil && (strings.Contains(err.Error(), "tls: ") || strings.Contains(err.Error(), "HTTP response to HTTPS client")):
		// Some handshake failures are plain errors: crypto/tls's "tls: handshake failure" and
		// the like, and net/http's "server gave HTTP response to HTTPS client" (a server that
		// speaks no TLS).
		return "TLS handshake failed"
	}
	return "no answer"
}
