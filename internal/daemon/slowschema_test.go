package daemon_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluice-dev/sluice/internal/config"
	dt "github.com/sluice-dev/sluice/internal/daemontest"
	"github.com/sluice-dev/sluice/internal/eventually"
)

// TestSlowRESTReaderAcrossInterfaceChange: a live REST stream of an
// interface whose client is slow. Its share evaluates Cat/tom (an Animal
// then), then a forced change after which Cat is no Animal, then a commit
// that would push the slow member out of the share's history. The member
// went on alone from before Cat/tom with the share's reader as it is now
// (the new schema), and judged Cat/tom by it: it lost the event every
// member that kept up got. It now gets it (commits are judged by the
// classes as they were then), and then the Conflict at the change that
// took the Cats out of the Animals, as every member does (the share ends
// there: see TestInterfaceStreamsEndWhenMembershipChanges).
func TestSlowRESTReaderAcrossInterfaceChange(t *testing.T) {
	t.Parallel()
	slowReaderAcrossInterfaceChange(t, false)
}

// TestSlowGraphQLReaderAcrossInterfaceChange: the same for a GraphQL
// subscription of Animal over SSE. A member gone on alone with the new
// schema cannot show a Cat as an Animal any more, and ends with a
// CONFLICT naming the change at Cat/tom's event, where it lost the event
// without a word; one that keeps up with its share gets Cat/tom, then the
// CONFLICT at the change.
func TestSlowGraphQLReaderAcrossInterfaceChange(t *testing.T) {
	t.Parallel()
	slowReaderAcrossInterfaceChange(t, true)
}

func slowReaderAcrossInterfaceChange(t *testing.T, gql bool) {
	// The client reads nothing from the big event's first bytes until
	// the end: on a loaded machine that can take longer than the default
	// write_timeout (1 min), which would cut the stream. Slow as it is,
	// this client is not the one write_timeout is for.
	d := dt.Start(t, func(c *config.Config) { c.WriteTimeout = 10 * time.Minute })
	d.CreateDatabase(t, "zoo", zooSchema)

	conn, err := net.Dial("tcp", strings.TrimPrefix(d.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req, _ := http.NewRequest("GET", d.URL+"/api/subscribe/admin/zoo/Animal", nil)
	if gql {
		req, _ = http.NewRequest("POST", d.URL+"/api/graphql/admin/zoo", strings.NewReader(`{"query":"subscription { Animal_added { _id name } }"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
	}
	dt.Admin()(req)
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", resp, err)
	}
	body := bufio.NewReader(resp.Body)
	for {
		l, err := body.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(l, ": connected") {
			if gql {
				_, _ = body.ReadString('\n')
			}
			break
		}
	}
	// From here the client reads nothing until the end.
	queued := func() int {
		n := 0
		rc, _ := conn.(*net.TCPConn).SyscallConn()
		var ierr error
		cerr := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
		if ierr != nil || cerr != nil {
			t.Log(ierr, cerr)
		}
		return n
	}
	big := strings.Repeat("x", 12<<20)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo", fmt.Sprintf(`{"@type":"Dog","@id":"big","name":%q}`, big))
	// The member took the big event and is writing it (blocked: 12 MB is
	// more than the socket buffers hold).
	eventually.True(t, 5*time.Minute, "the big event reaches the socket", func() bool { return queued() > 32<<10 })

	// A parked stream whose socket is full takes the next entry, then
	// writes on a goroutine, blocked: d1 gets it there.
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo", `{"@type":"Dog","@id":"d1","name":"D1"}`)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo", `{"@type":"Cat","@id":"tom","name":"Tom"}`)
	d.MustDo(t, 200, dt.Admin(), "PUT", "/api/schema/admin/zoo?force=true", zooCatNotAnimal)
	d.MustDo(t, 200, dt.Admin(), "POST", "/api/document/admin/zoo", fmt.Sprintf(`{"@type":"Dog","@id":"rex","name":%q}`, strings.Repeat("y", 200<<10)))

	t.Logf("subscriptions: %s", d.MustDo(t, 200, dt.Admin(), "GET", "/api/admin/subscriptions", nil).Body)
	// Read everything now.
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Minute))
	var subjects []string
	for len(subjects) < 4 {
		l, err := body.ReadString('\n')
		if err != nil {
			t.Fatalf("after %v: %v", subjects, err)
		}
		if strings.HasPrefix(l, "data: ") {
			if strings.Contains(l, `"errors"`) || strings.Contains(l, `"api:error"`) {
				if !strings.Contains(l, `"CONFLICT"`) && !strings.Contains(l, "api:Conflict") || !strings.Contains(l, "Cat stop implementing Animal") {
					t.Errorf("slow live stream after %v: %s; want a Conflict naming Cat and Animal", subjects, l)
				}
				subjects = append(subjects, "error")
				break
			}
			key := `"subject":"`
			if gql {
				key = `"_id":"`
			}
			i := strings.Index(l, key)
			if i < 0 {
				t.Fatalf("frame: %.300s", l)
			}
			subjects = append(subjects, strings.SplitN(l[i+len(key):], `"`, 2)[0])
			if subjects[len(subjects)-1] == "Dog/rex" {
				break
			}
		}
	}
	// The share evaluated Cat/tom when Cat was an Animal, and ends at
	// the change, which took the Cats out of the Animals without an
	// event: the slow member gets what it published, then the error, as
	// a stream that kept up did. Were it to go on alone with the new
	// schema before it took Cat/tom, the REST member would send Cat/tom
	// as it was and end at the change all the same; a GraphQL member
	// cannot show Cat/tom as an Animal, and ends there with the error
	// naming the change.
	want := []string{"Dog/big Dog/d1 Cat/tom error"} // as a stream that kept up
	if gql {
		want = append(want, "Dog/big Dog/d1 error")
	}
	if got := strings.Join(subjects, " "); !slices.Contains(want, got) {
		t.Errorf("slow live stream got %s, want one of %q", got, want)
	}
}
