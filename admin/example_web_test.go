package admin_test

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/mkit-dev/mkitfdb/admin"
	"github.com/mkit-dev/mkitfdb/fdblayer"
	"github.com/mkit-dev/mkitfdb/fdblayer/memengine"
	"github.com/mkit-dev/mkitfdb/timers"
)

// operators are the example service's operators and their passwords.
var operators = map[string]string{"ada": "correct horse battery staple"}

// operator is the example service's own authentication: the operator a
// request's basic credentials name, or false.
func operator(r *http.Request) (string, bool) {
	user, pass, ok := r.BasicAuth()
	want, known := operators[user]
	return user, ok && known && subtle.ConstantTimeCompare([]byte(pass), []byte(want)) == 1
}

// ExampleNewWebHandler mounts the web view on a service's mux, with
// repairs enabled behind the service's own authentication. The README's
// "The web view" shows the same code.
func ExampleNewWebHandler() {
	s, err := fdblayer.Open(memengine.New(), fdblayer.Config{}) // the service's store
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	mux := http.NewServeMux()

	// README:begin
	web, err := admin.NewWebHandler(admin.WebConfig{
		Store:     s,                                    // the service's own, live
		KindNames: map[timers.Kind]string{1000: "ship"}, // as the admin command's
		Repairs:   true,                                 // default false: read-only
		Authorize: func(r *http.Request, a admin.Action) (string, error) {
			user, ok := operator(r) // the service's own authentication
			if !ok {
				return "", errors.New("operators only")
			}
			return user, nil // who: logged, and recorded beside a quarantined row
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux.Handle("/admin/", http.StripPrefix("/admin", web))
	// README:end

	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, path := range []string{"/admin/lag?format=json", "/admin/partitions"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// A new store holds one partition: the library's record of its
		// formats (package evolve).
		fmt.Println(path, resp.StatusCode, resp.Header.Get("Content-Type"), strings.Contains(string(body), `"partitions":1`) || strings.Contains(string(body), "1 partitions on this page"))
	}
	// Output:
	// /admin/lag?format=json 200 application/json true
	// /admin/partitions 200 text/html; charset=utf-8 true
}
