package console

import (
	"embed"
	"io/fs"
	"net/http"

	"github.com/gin-gonic/gin"
)

//go:embed assets
var assets embed.FS

// Prefix is where the console is served.
const Prefix = "/ui/"

// csp keeps the pages to their own origin: scripts and styles only from
// the embedded files (no inline script), data only from this node's API.
// Links to other nodes' consoles are plain navigations, which CSP allows.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the embedded pages under Prefix.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic("BUG: console: embedded assets missing: " + err.Error())
	}
	files := http.StripPrefix(Prefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// The pages change with the binary: revalidate, never cache stale.
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// Register adds GET /ui (a redirect to /ui/) and GET /ui/*path to r. The
// routes are not authenticated: they serve only the static pages, which
// ask the operator for a token before they call the API.
func Register(r gin.IRoutes) {
	h := Handler()
	r.GET("/ui", func(c *gin.Context) { c.Redirect(http.StatusMovedPermanently, Prefix) })
	r.GET("/ui/*path", gin.WrapH(h))
}
