package overview

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// tokenCookie carries a browser's bearer token; HttpOnly, Secure, SameSite=Strict.
const tokenCookie = "kubeopera-fleet-token"

// tokenPattern is what a bearer token may contain (a JWT's base64url and dots, or the RFC 6750
// b64token characters); anything else is refused before it reaches a cookie.
var tokenPattern = regexp.MustCompile(`^[A-Za-z0-9._~+/=-]+$`)

// maxTokenLength keeps the cookie within what browsers store (4 KiB per cookie).
const maxTokenLength = 3800

// secureRoutes serves /login, /logout and /assets/ to anyone and everything else through
// protected (the authentication and authorization filter around the overview), with the
// browser's cookie as bearer token and a login page instead of a bare 401 or 403.
func (s *Server) secureRoutes(protected http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /assets/", s.ui.serveAsset)
	mux.HandleFunc("GET "+pathLogin, s.serveLogin)
	mux.HandleFunc("POST "+pathLogin, s.login)
	mux.HandleFunc("POST "+pathLogout, s.logout)
	mux.Handle("/", s.withBrowserCredentials(protected))
	return mux
}

// loginPage is the data of the login page.
type loginPage struct {
	chrome
	Message string
	Next    string
}

func (s *Server) renderLogin(w http.ResponseWriter, status int, message, next string) {
	s.ui.render(w, status, pageLogin, "base", loginPage{
		chrome:  chrome{Title: "Log in", Secure: false},
		Message: message,
		Next:    next,
	})
}

func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	s.renderLogin(w, http.StatusOK, "", safeNext(r.URL.Query().Get("next")))
}

// login keeps the posted token in the cookie and sends the browser on to the page it asked for.
// The token is checked by the filter on the next request, not here.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-origin login refused", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.renderLogin(w, http.StatusBadRequest, "The form could not be read.", "")
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	token := strings.TrimSpace(r.PostForm.Get("token"))
	if t, ok := strings.CutPrefix(token, "Bearer "); ok {
		token = strings.TrimSpace(t)
	}
	if len(token) > maxTokenLength || !tokenPattern.MatchString(token) {
		s.renderLogin(w, http.StatusBadRequest, "That does not look like a token: paste the output of kubectl create token.", next)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: tokenCookie, Value: token, Path: "/",
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode,
	})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout forgets the cookie.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-origin logout refused", http.StatusForbidden)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: tokenCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode,
	})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, pathLogin, http.StatusSeeOther)
}

// sameOrigin refuses a form posted from another site (a browser sends Origin with a POST).
func sameOrigin(r *http.Request) bool {
	return crossOrigin.Check(r) == nil
}

// crossOrigin is net/http's protection against cross-site requests: Sec-Fetch-Site (browsers
// send it, same-origin for the login form even under Referrer-Policy no-referrer, where Origin
// is "null"), else Origin against Host; a request with neither is not from a browser.
var crossOrigin = http.NewCrossOriginProtection()

// safeNext is next when it is a path on this server, else "/".
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, `\`) {
		return "/"
	}
	if u, err := url.Parse(next); err != nil || u.Host != "" || u.Scheme != "" {
		return "/"
	}
	return next
}

// withBrowserCredentials turns the cookie into a bearer token when the request has no
// Authorization header, sends a browser without any credential to /login, and shows a browser the
// login page, with the filter's status, when the filter refuses the request: 401 (no identity),
// 403 (not authorized) or 500 (the TokenReview failed, as it does for an expired or malformed
// token, or the backend did not answer). Responses of the overview itself pass unchanged.
func (s *Server) withBrowserCredentials(protected http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		html := wantsHTML(r)
		if r.Header.Get("Authorization") == "" {
			if c, err := r.Cookie(tokenCookie); err == nil && c.Value != "" {
				r = r.Clone(r.Context())
				r.Header.Set("Authorization", "Bearer "+c.Value)
			} else if html {
				http.Redirect(w, r, pathLogin+"?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
		}
		if !html {
			protected.ServeHTTP(w, r)
			return
		}
		reached := new(bool)
		r = r.WithContext(context.WithValue(r.Context(), reachedKey{}, reached))
		dw := &deniedWriter{ResponseWriter: w, reached: reached}
		protected.ServeHTTP(dw, r)
		next := safeNext(r.URL.RequestURI())
		switch dw.denied {
		case 0:
		case http.StatusUnauthorized:
			s.renderLogin(w, dw.denied, "The token was not accepted: it may have expired. Paste a new one.", next)
		case http.StatusForbidden:
			s.renderLogin(w, dw.denied, "This identity may not view the fleet overview: bind its ServiceAccount to ClusterRole kubeopera-fleet-viewer, or paste another token.", next)
		default:
			s.renderLogin(w, dw.denied, "The token could not be verified: the backend refused it (an expired or malformed token) or did not answer. Paste a new one, or see the manager's log.", next)
		}
	})
}

// reachedKey holds a *bool in a request's context, set when the request passed the filter.
type reachedKey struct{}

// markReached records, for withBrowserCredentials, that a request passed the filter: what is
// written from then on is the overview's answer, not the filter's.
func markReached(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := r.Context().Value(reachedKey{}).(*bool); ok {
			*p = true
		}
		next.ServeHTTP(w, r)
	})
}

// wantsHTML tells a browser's page request from an API client's.
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// deniedWriter holds back the filter's refusal (401, 403 or 500 in plain text, written before the
// request reached the overview) so the login page can be written instead; any other response
// goes through.
type deniedWriter struct {
	http.ResponseWriter
	reached     *bool
	denied      int
	wroteHeader bool
}

func (d *deniedWriter) WriteHeader(code int) {
	if d.wroteHeader {
		return
	}
	d.wroteHeader = true
	refused := code == http.StatusUnauthorized || code == http.StatusForbidden || code == http.StatusInternalServerError
	if refused && !*d.reached {
		d.denied = code
		h := d.Header()
		h.Del("Content-Type")
		h.Del("Content-Length")
		return
	}
	d.ResponseWriter.WriteHeader(code)
}

func (d *deniedWriter) Write(b []byte) (int, error) {
	if !d.wroteHeader {
		d.WriteHeader(http.StatusOK)
	}
	if d.denied != 0 {
		return len(b), nil
	}
	return d.ResponseWriter.Write(b)
}

// Flush lets a streamed response through.
func (d *deniedWriter) Flush() {
	if f, ok := d.ResponseWriter.(http.Flusher); ok && d.denied == 0 {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (d *deniedWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }
