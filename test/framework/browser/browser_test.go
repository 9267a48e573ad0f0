package browser

import (
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestStart drives chromium against a local page: the script ran, the computed style is read and
// the screenshot is a PNG of the window's width.
func TestStart(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`<!doctype html><title>probe</title><div id="b" style="background:#1a7f37">x</div>` +
			`<script>document.getElementById('b').textContent='ran'</script>`))
	}))
	defer srv.Close()
	ctx := Start(t)
	if err := Do(ctx, 30*time.Second, chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.CSS("#b"))); err != nil {
		t.Fatal(err)
	}
	text, err := Run(ctx, 10*time.Second, chromedp.Text(chromedp.CSS("#b")))
	if err != nil || text != "ran" {
		t.Fatalf("text = %q, %v; want the script's", text, err)
	}
	bg, err := Run(ctx, 10*time.Second, chromedp.Evaluate[string](`getComputedStyle(document.getElementById('b')).backgroundColor`))
	if err != nil || bg != "rgb(26, 127, 55)" {
		t.Fatalf("background = %q, %v", bg, err)
	}
	t.Setenv("KUBEOPERA_TEST_ARTIFACTS", t.TempDir())
	path := Screenshot(t, ctx, "probe")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if w := img.Bounds().Dx(); w != 1440 {
		t.Errorf("screenshot width = %d, want 1440", w)
	}
}
