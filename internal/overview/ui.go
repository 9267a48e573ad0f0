package overview

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

// static holds app.js, style.css and, when make ui ran, vendor/echarts.min.js. Embedding the
// directory (not the file) keeps the build working without the vendor file.
//
//go:embed static
var static embed.FS

//go:embed templates/*.html
var templateFiles embed.FS

// chartLibrary is the chart library's path under /assets/, built by make ui.
const chartLibrary = "vendor/echarts.min.js"

// asset is one static file, with its validator.
type asset struct {
	body        []byte
	etag        string
	contentType string
}

// ui is the parsed templates and the static files.
type ui struct {
	pages  map[string]*template.Template
	assets map[string]asset
}

// Page templates, each executed as "base" with its own "content".
const (
	pageIndex   = "index.html"
	pageCluster = "cluster.html"
	pageLogin   = "login.html"
	pageError   = "error.html"
)

func newUI() (*ui, error) {
	assets, err := loadAssets(static)
	if err != nil {
		return nil, err
	}
	u := &ui{pages: map[string]*template.Template{}, assets: assets}
	funcs := template.FuncMap{"asset": u.assetURL}
	for _, p := range []string{pageIndex, pageCluster, pageLogin, pageError} {
		t, err := template.New(p).Funcs(funcs).ParseFS(templateFiles, "templates/base.html", "templates/fleet.html", "templates/"+p)
		if err != nil {
			return nil, fmt.Errorf("failed to parse the fleet overview's template %s: %w", p, err)
		}
		u.pages[p] = t
	}
	return u, nil
}

func loadAssets(fsys fs.FS) (map[string]asset, error) {
	out := map[string]asset{}
	err := fs.WalkDir(fsys, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		out[strings.TrimPrefix(p, "static/")] = asset{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, contentType: ct}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to read the fleet overview's static files: %w", err)
	}
	return out, nil
}

// hasChartLibrary tells whether make ui put the chart library in place before the build.
func (u *ui) hasChartLibrary() bool {
	_, ok := u.assets[chartLibrary]
	return ok
}

// assetURL is name's URL under /assets/ with its content's hash, so a new build is fetched anew.
func (u *ui) assetURL(name string) string {
	a, ok := u.assets[name]
	if !ok {
		return "/assets/" + name
	}
	return "/assets/" + name + "?v=" + strings.Trim(a.etag, `"`)
}

// serveAsset serves /assets/<name>, revalidated with its ETag.
func (u *ui) serveAsset(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/assets/")
	a, ok := u.assets[name]
	if !ok {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("ETag", a.etag)
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

// render executes page with data into w with status; a failed execution is a 500 without a half
// written page.
func (u *ui) render(w http.ResponseWriter, status int, page, tmpl string, data any) {
	var buf bytes.Buffer
	if err := u.pages[page].ExecuteTemplate(&buf, tmpl, data); err != nil {
		http.Error(w, "failed to render the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
