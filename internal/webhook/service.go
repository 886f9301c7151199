package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/sluice-dev/sluice"
	"github.com/sluice-dev/sluice/internal/auth"
	"github.com/sluice-dev/sluice/internal/cloudevent"
	"github.com/sluice-dev/sluice/internal/engine"
	"github.com/sluice-dev/sluice/internal/filter"
	"github.com/sluice-dev/sluice/internal/postgres"
	"github.com/sluice-dev/sluice/internal/schema"
	"github.com/sluice-dev/sluice/internal/streamparam"
)

// Service manages webhooks for the API: admins of a database create, read,
// change, pause, resume, replay and delete its webhooks. It is safe for
// concurrent use.
type Service struct {
	eng        *engine.Engine
	store      *postgres.DB
	keys       *Keys
	policy     Policy
	max        int
	maxPerUser int
}

// NewService returns a Service that keeps at most max webhooks per
// database and maxPerUser per user who made them (0: no cap; the super
// user is exempt), and refuses URLs policy refuses.
func NewService(eng *engine.Engine, store *postgres.DB, keys *Keys, policy Policy, max, maxPerUser int) *Service {
	return &Service{eng: eng, store: store, keys: keys, policy: policy, max: max, maxPerUser: maxPerUser}
}

// Input is a webhook's settings as a request gives them. A setting left
// out is not given (a change leaves it alone; a creation takes its
// default); null gives its default (a change sets it back to what a
// creation without it has), but for url, which has none.
type Input struct {
	URL         Setting[string]   `json:"url"`
	Description Setting[string]   `json:"description"`
	Classes     Setting[[]string] `json:"classes"`
	Ops         Setting[[]string] `json:"ops"`
	Filter      Given             `json:"filter"`
	Batch       Setting[string]   `json:"batch"`
	// After (creation only) starts delivery after this retained position
	// instead of after the newest commit.
	After *string `json:"after"`
}

// Setting is a setting a request may give: Set when it is given, Null
// when as null (which a pointer could not tell from left out: a change to
// null was taken as no change, answered 200).
type Setting[T any] struct {
	Set, Null bool
	Value     T
}

// UnmarshalJSON records the value, null included.
func (s *Setting[T]) UnmarshalJSON(b []byte) error {
	s.Set = true
	if string(b) == "null" {
		s.Null = true
		return nil
	}
	return json.Unmarshal(b, &s.Value)
}

// given reports whether s gives a value other than null.
func (s Setting[T]) given() bool { return s.Set && !s.Null }

// Given is a JSON value a request may give, null included (which a
// pointer could not tell from absent).
type Given struct {
	Set   bool
	Value json.RawMessage
}

// UnmarshalJSON records the value, null included.
func (g *Given) UnmarshalJSON(b []byte) error {
	g.Set, g.Value = true, slices.Clone(b)
	return nil
}

// Limits of what a webhook's settings may hold.
const (
	maxURLBytes         = 2048
	maxDescriptionBytes = 1024
	// maxFilterBytes bounds a filter's JSON: a webhook's settings are
	// returned whole in every listing of its database's webhooks, and its
	// filter is parsed at each start of its loop. 64 KiB holds any filter
	// written by hand and a list of a few thousand values to match.
	maxFilterBytes = 64 << 10
)

// admin authorizes u to manage the webhooks of org/name.
func (s *Service) admin(ctx context.Context, u *sluice.User, org, name string) (*sluice.Database, *sluice.Schema, error) {
	return s.eng.Database(ctx, u, org, name, sluice.RoleAdmin)
}

// deliverer returns u as the creator of a webhook u makes or changes
// where, what or from where it delivers, with the API token u signed in
// with, if any, or the key that verified u's JWT: the webhook then
// delivers as u, and while that token is unrevoked and that key is not
// removed from the key set. Another admin who re-points a webhook must
// not go on receiving with its maker's access (@private fields included)
// once its own access is taken away; nor a leaked token once it is
// revoked, nor the holder of a compromised key once it is removed.
//
// A webhook that delivered as another user counts against u's
// max_webhooks_per_user once it delivers as u (the super user has none).
func (s *Service) deliverer(ctx context.Context, u *sluice.User) postgres.WebhookCreator {
	c := postgres.WebhookCreator{ID: u.ID, Name: u.Name}
	if !u.Superuser {
		c.Cap = s.maxPerUser
	}
	if cred := auth.CredentialFrom(ctx); cred != nil && cred.User != nil && cred.User.ID == u.ID {
		c.TokenID, c.JWTKey = cred.TokenID, cred.JWTKey
	}
	return c
}

// setCreator makes w deliver as c.
func setCreator(w *sluice.Webhook, c postgres.WebhookCreator) {
	w.CreatorID, w.CreatorName, w.CreatorTokenID, w.CreatorJWTKey = c.ID, c.Name, c.TokenID, c.JWTKey
}

// Create makes a webhook on org/name for u (who must be an admin of it),
// delivering with u's read access (and while the API token u signed in
// with, if any, is unrevoked), and returns it with its signing secret in
// text form (shown this once).
func (s *Service) Create(ctx context.Context, u *sluice.User, org, name string, in Input) (*sluice.Webhook, string, error) {
	d, sch, err := s.admin(ctx, u, org, name)
	if err != nil {
		return nil, "", err
	}
	if !in.URL.given() {
		return nil, "", sluice.Errorf(sluice.CodeInvalid, "url is required: the endpoint to POST events to")
	}
	w := &sluice.Webhook{Database: d, Batch: sluice.BatchEvent, Ops: defaultOps()}
	setCreator(w, s.deliverer(ctx, u))
	if err := s.apply(sch, w, in); err != nil {
		return nil, "", err
	}
	if in.After != nil {
		p, err := sluice.ParsePosition(*in.After)
		if err != nil {
			return nil, "", sluice.Errorf(sluice.CodeInvalid, "after: %s", sluice.ErrorMessage(err))
		}
		if err := s.checkAfter(ctx, d, p); err != nil {
			return nil, "", err
		}
		w.Position = p
	}
	secret := newSecret()
	perUser := s.maxPerUser
	if u.Superuser {
		perUser = 0
	}
	if err := s.store.CreateWebhook(ctx, w, func(id int64) ([]byte, error) { return s.keys.Seal(id, secret) }, s.max, perUser); err != nil {
		return nil, "", err
	}
	return w, showSecret(secret), nil
}

// apply checks in against the database's schema and the policy, and sets
// what it gives on w.
func (s *Service) apply(sch *sluice.Schema, w *sluice.Webhook, in Input) error {
	if in.URL.Null {
		return sluice.Errorf(sluice.CodeInvalid, "url: null is no URL: a webhook needs the endpoint to POST events to (leave url out to keep it)")
	}
	if in.URL.Set {
		if err := s.checkURL(in.URL.Value); err != nil {
			return err
		}
		w.URL = in.URL.Value
	}
	if in.Description.Set {
		d := in.Description.Value
		switch {
		case len(d) > maxDescriptionBytes:
			return sluice.Errorf(sluice.CodeInvalid, "description is %d bytes: at most %d", len(d), maxDescriptionBytes)
		case !utf8.ValidString(d):
			return sluice.Errorf(sluice.CodeInvalid, "description: want UTF-8 text")
		case strings.ContainsRune(d, 0):
			return sluice.Errorf(sluice.CodeInvalid, "description: a NUL character (\\u0000) is refused: Postgres text cannot hold one")
		}
		w.Description = d
	}
	if in.Classes.Null {
		w.Classes = nil // every class
	} else if in.Classes.Set {
		classes := in.Classes.Value
		if len(classes) == 0 {
			return sluice.Errorf(sluice.CodeInvalid, "classes is an empty list: name document classes, or give null (or, making a webhook, leave it out) for every class")
		}
		for i, c := range classes {
			cl := sch.Class(c)
			if cl == nil || cl.Kind == sluice.KindSubdocument {
				return sluice.Errorf(sluice.CodeInvalid, "classes[%d]: %s is not a document class of %s", i, sluice.Echo(c), w.Database.Path())
			}
			if slices.Contains(classes[:i], c) {
				return sluice.Errorf(sluice.CodeInvalid, "classes[%d]: %s is given twice", i, sluice.Echo(c))
			}
		}
		w.Classes = slices.Clone(classes)
	}
	if in.Ops.Null {
		w.Ops = defaultOps()
	} else if in.Ops.Set {
		ops, err := streamparam.OpList("ops", in.Ops.Value)
		if err != nil {
			return err
		}
		// As classes: a token given twice is a mistake to name (a
		// client that meant another), not one to drop.
		for i, o := range in.Ops.Value {
			if slices.Contains(in.Ops.Value[:i], o) {
				return sluice.Errorf(sluice.CodeInvalid, "ops[%d]: %q is given twice", i, o)
			}
		}
		w.Ops = streamparam.OpTokens(ops)
	}
	if in.Filter.Set {
		w.Filter = nil
		f := bytes.TrimSpace(in.Filter.Value)
		if len(f) > maxFilterBytes {
			return sluice.Errorf(sluice.CodeInvalid, "filter is %d bytes of JSON: at most %d (64 KiB) are taken", len(f), maxFilterBytes)
		}
		if len(f) > 0 && string(f) != "null" {
			w.Filter = slices.Clone(f)
		}
	}
	if in.Batch.Null {
		w.Batch = sluice.BatchEvent
	} else if in.Batch.Set {
		switch b := sluice.WebhookBatch(in.Batch.Value); b {
		case sluice.BatchEvent, sluice.BatchCommit:
			w.Batch = b
		default:
			return sluice.Errorf(sluice.CodeInvalid, "batch: %s is not a batching mode: want event (a request per event) or commit (a request per commit)", sluice.Echo(in.Batch.Value))
		}
	}
	_, err := selector(sch, w)
	return err
}

// defaultOps returns the operations a webhook delivers unless told
// otherwise: all three.
func defaultOps() []string { return []string{"create", "update", "delete"} }

// selector returns the events w selects, checked against sch: the filter
// must fit the one class w selects.
func selector(sch *sluice.Schema, w *sluice.Webhook) (cloudevent.Selector, error) {
	ops, err := streamparam.OpList("ops", w.Ops)
	if err != nil {
		return cloudevent.Selector{}, err
	}
	sel := cloudevent.Selector{Classes: w.Classes, Ops: ops}
	if w.Filter == nil {
		return sel, nil
	}
	if len(w.Classes) != 1 {
		return sel, sluice.Errorf(sluice.CodeInvalid, "filter needs exactly one class in classes (the filter is a <Class>_Filter of it; it applies to its subclasses too)")
	}
	dec := json.NewDecoder(bytes.NewReader(w.Filter))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return sel, sluice.Errorf(sluice.CodeInvalid, "filter: want a JSON object, a %s_Filter as in GraphQL", w.Classes[0])
	}
	f, err := filter.Parse(sch, w.Classes[0], m)
	if err != nil {
		return sel, err
	}
	if err := cloudevent.CheckFilter("filter", f); err != nil {
		return sel, err
	}
	sel.Filter = f
	return sel, nil
}

// hiddenTested returns the path of the first field filter e tests, at any
// depth, that vis does not see ("" for none).
func hiddenTested(e filter.Expr, vis *schema.Visibility) string {
	switch x := e.(type) {
	case *filter.And:
		for _, s := range x.Exprs {
			if p := hiddenTested(s, vis); p != "" {
				return p
			}
		}
	case *filter.Or:
		for _, s := range x.Exprs {
			if p := hiddenTested(s, vis); p != "" {
				return p
			}
		}
	case *filter.Not:
		return hiddenTested(x.Expr, vis)
	case *filter.Compare:
		if x.Field != nil && !vis.Field(x.Field) {
			return x.Field.Name
		}
	case *filter.Sub:
		return hiddenBelow(x.Field, x.Expr, vis)
	case *filter.Quant:
		return hiddenBelow(x.Field, x.Elem, vis)
	case *filter.Ref:
		return hiddenBelow(x.Field, x.Expr, vis)
	}
	return ""
}

// hiddenBelow is hiddenTested of field f and e, tested within it.
func hiddenBelow(f *sluice.Field, e filter.Expr, vis *schema.Visibility) string {
	if !vis.Field(f) {
		return f.Name
	}
	if p := hiddenTested(e, vis); p != "" {
		return f.Name + "." + p
	}
	return ""
}

// checkURL refuses URLs a webhook cannot have: not http or https, with
// credentials, too long, with no host or a port no connection can use,
// naming an IPv4 address in a form other than a.b.c.d, or naming a host
// the policy refuses outright (an address literal, or localhost). Other
// names are checked on the address they resolve to, each time one is
// dialled.
func (s *Service) checkURL(raw string) error {
	if len(raw) > maxURLBytes {
		return sluice.Errorf(sluice.CodeInvalid, "url is longer than %d bytes", maxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" {
		return sluice.Errorf(sluice.CodeInvalid, "url %s: want an absolute http or https URL, such as https://example.com/hooks/sluice", sluice.Echo(raw))
	}
	if u.User != nil {
		return sluice.Errorf(sluice.CodeInvalid, "url: credentials in the URL are refused (they would be shown to every admin of the database); verify the webhook-signature header instead")
	}
	if u.Fragment != "" {
		return sluice.Errorf(sluice.CodeInvalid, "url: a fragment (#…) is never sent; leave it out")
	}
	host := u.Hostname()
	if host == "" {
		return sluice.Errorf(sluice.CodeInvalid, "url %s names no host: want an absolute http or https URL, such as https://example.com/hooks/sluice", sluice.Echo(raw))
	}
	host = dialledHost(host)
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return sluice.Errorf(sluice.CodeInvalid, "url: port %.16s is not a TCP port: want 1 to 65535, or none for the scheme's (80 or 443)", p)
		}
	}
	if numericIPv4(host) {
		return sluice.Errorf(sluice.CodeInvalid, "url: host %s is an IPv4 address written other than as four decimal numbers (such as 192.0.2.1, without a trailing dot): write it so, or use a name", sluice.Echo(host))
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		h := strings.ToLower(strings.TrimSuffix(host, "."))
		if h != "localhost" && !strings.HasSuffix(h, ".localhost") {
			return nil
		}
		addr = netip.MustParseAddr("127.0.0.1") // RFC 6761: always loopback
	}
	if err := s.policy.Check(addr); err != nil {
		return sluice.Errorf(sluice.CodeInvalid, "url: %s", err.Error())
	}
	return nil
}

// dialledHost returns host as net/http dials it: a host that is not all
// ASCII is mapped by IDNA's lookup profile (as net/http's transport does,
// and left as it is when that fails, as there), so fullwidth and other
// mapped characters become what they stand for: ｌｏｃａｌｈｏｓｔ is
// localhost, １２７.０.０.１ is 127.0.0.1. The checks of checkURL are made
// on it (found by review: such hosts were taken, and refused only when
// dialled). An address literal (a zone may be any text) is left alone.
func dialledHost(host string) string {
	if _, err := netip.ParseAddr(host); err == nil {
		return host
	}
	for i := range len(host) {
		if host[i] >= utf8.RuneSelf {
			if a, err := idna.Lookup.ToASCII(host); err == nil {
				return a
			}
			return host
		}
	}
	return host
}

// numericIPv4 says whether host, which netip did not parse as an
// address, is one all the same to a resolver: one to four numbers, each
// decimal, octal (0…) or hexadecimal (0x…), separated by dots, maybe with
// a trailing dot (127.1, 2130706433, 0x7f000001, 0177.0.0.1, 127.0.0.1.),
// which inet_aton, and so getaddrinfo, reads as an IPv4 address. The
// dialer's check refuses what such a host reaches, but only when it is
// dialled; refusing the form when the webhook is made gives the early
// 400 that address literals get, whatever address it names.
func numericIPv4(host string) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return false
	}
	parts := strings.Split(strings.TrimSuffix(host, "."), ".")
	if len(parts) > 4 {
		return false
	}
	for _, p := range parts {
		digits := "0123456789"
		if len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X') {
			p, digits = p[2:], "0123456789abcdefABCDEF"
			if p == "" {
				continue // "0x" alone is 0 to inet_aton
			}
		}
		if p == "" || strings.Trim(p, digits) != "" {
			return false
		}
	}
	return true
}

// List returns the webhooks of org/name.
func (s *Service) List(ctx context.Context, u *sluice.User, org, name string) ([]*sluice.Webhook, error) {
	d, _, err := s.admin(ctx, u, org, name)
	if err != nil {
		return nil, err
	}
	return s.store.Webhooks(ctx, d)
}

// Details is a webhook with what its status page shows.
type Details struct {
	*sluice.Webhook
	Lag      sluice.WebhookLag
	Attempts []sluice.WebhookAttempt
}

// Get returns webhook id of org/name with its lag and its last attempts
// (at most attempts of them).
func (s *Service) Get(ctx context.Context, u *sluice.User, org, name string, id int64, attempts int) (*Details, error) {
	d, _, err := s.admin(ctx, u, org, name)
	if err != nil {
		return nil, err
	}
	w, err := s.store.Webhook(ctx, d, id)
	if err != nil {
		return nil, err
	}
	out := &Details{Webhook: w}
	if out.Lag, err = s.store.WebhookLag(ctx, w); err != nil {
		return nil, err
	}
	if out.Attempts, err = s.store.WebhookAttempts(ctx, w.ID, attempts); err != nil {
		return nil, err
	}
	return out, nil
}

// Attempts returns the last attempts of webhook id of org/name, newest
// first, at most limit.
func (s *Service) Attempts(ctx context.Context, u *sluice.User, org, name string, id int64, limit int) ([]sluice.WebhookAttempt, error) {
	d, _, err := s.admin(ctx, u, org, name)
	if err != nil {
		return nil, err
	}
	if _, err := s.store.Webhook(ctx, d, id); err != nil {
		return nil, err
	}
	return s.store.WebhookAttempts(ctx, id, limit)
}

// Update changes the settings in of webhook id of org/name. A delivery
// being retried starts its schedule again. A change of where or what it
// delivers (anything but its description) makes it deliver as u.
func (s *Service) Update(ctx context.Context, u *sluice.User, org, name string, id int64, in Input) (*sluice.Webhook, error) {
	d, sch, err := s.admin(ctx, u, org, name)
	if err != nil {
		return nil, err
	}
	if in.After != nil {
		return nil, sluice.Errorf(sluice.CodeInvalid, "after: to move a webhook's position, replay it (POST …/replay)")
	}
	// The request is merged into the webhook as it is in the change's
	// transaction, its row locked: merged into a copy read before, it
	// would write back the copy's other settings, undoing a change of
	// them committed meanwhile (two PATCHes of different fields, both
	// answered 200, left one of them).
	// The filter, classes and ops too: they are judged with the access
	// the webhook delivers with, and its counters and attempts, which
	// every admin sees, tell what they matched.
	rebind := in.URL.Set || in.Classes.Set || in.Ops.Set || in.Filter.Set || in.Batch.Set
	err = s.store.UpdateWebhook(ctx, d, id, func(w *sluice.Webhook) (postgres.WebhookSettings, error) {
		if err := s.apply(sch, w, in); err != nil {
			return postgres.WebhookSettings{}, err
		}
		c := postgres.WebhookCreator{ID: w.CreatorID, Name: w.CreatorName, TokenID: w.CreatorTokenID, JWTKey: w.CreatorJWTKey}
		if rebind {
			c = s.deliverer(ctx, u)
		}
		return postgres.WebhookSettings{URL: w.URL, Description: w.Description,
			Classes: w.Classes, Ops: w.Ops, Filter: w.Filter, Batch: w.Batch, Creator: c}, nil
	})
	if err != nil {
		return nil, err
	}
	return s.store.Webhook(ctx, d, id)
}

// Pause pauses webhook id of org/name.
func (s *Service) Pause(ctx context.Context, u *sluice.User, org, name string, id int64) (*sluice.Webhook, error) {
	d, _, err := s.admin(ctx, u, org, name)
	if err != nil {
		return nil, err
	}
	if err := s.store.PauseWebhook(ctx, d, id); err != nil {
		return nil, err
	}
	return s.store.Webhook(ctx, d, id)
}

// Resume makes webhook id of org/name active again, from its position, or
// after after (a position) when given, then delivering as u. A webhook
// whose creator lost its access stays paused (Conflict, saying why) unless
// after is given; one whose history was pruned meanwhile answers Gone,
// naming the gap.
func (s *Service) Resume(ctx context.Context, u *sluice.User, org, name string, id int64, after *string) (*sluice.Webhook, error) {
	d, _, err := s.admin(ctx, u, org, name)
	if err != nil {
		return nil, err
	}
	w, err := s.store.Webhook(ctx, d, id)
	if err != nil {
		return nil, err
	}
	if after == nil {
		if err := s.checkCreator(ctx, w); err != nil {
			return nil, sluice.Errorf(sluice.CodeConflict, "webhook %d delivers with the read access of %s, who no longer has it (%s); delete it, or resume it with after: %s to have it deliver as you",
				id, w.CreatorName, sluice.ErrorMessage(err), w.Position)
		}
	}
	var from *sluice.Position
	if after != nil {
		p, err := sluice.ParsePosition(*after)
		if err != nil {
			return nil, sluice.Errorf(sluice.CodeInvalid, "after: %s", sluice.ErrorMessage(err))
		}
		if err := s.checkAfter(ctx, d, p); err != nil {
			return nil, err
		}
		from = &p
	}
	if err := s.store.ResumeWebhook(ctx, d, id, from, s.deliverer(ctx, u)); err != nil {
		return nil, err
	}
	return s.store.Webhook(ctx, d, id)
}

// checkAfter refuses p, a webhook's after position in database d, when it
// is inside a commit past its last change (sluice.CheckIndex), as
// streams and /api/changes refuse it: taken as a cursor, it would deliver
// from the end of the commit, a point no event named; and when its tag
// names a commit the log no longer holds, another having taken its
// number (sluice.CheckTag: a Gone error), as streams refuse it: the
// webhook would deliver from a state the log never had. The store checks
// the rest (the epoch, retained history, ahead of the log).
func (s *Service) checkAfter(ctx context.Context, d *sluice.Database, p sluice.Position) error {
	if !postgres.NamesCommit(p) || p.Epoch != d.Epoch || p.Seq == 0 {
		return nil
	}
	c, err := s.store.PositionCommit(ctx, d.ID, p)
	if err != nil || !c.Found {
		return err // pruned, or ahead of the log: the store says which
	}
	if err := sluice.CheckTag(d, "after", p, c.Stamp); err != nil {
		return err
	}
	return sluice.CheckIndex(d, "after", p, c.Changes)
}

// checkCreator checks that w's creator still has the read access w
// delivers with; its error says what is missing.
func (s *Service) checkCreator(ctx context.Context, w *sluice.Webhook) error {
	return checkCreator(ctx, s.store, w)
}

// Replay moves webhook id of org/name to position after: it delivers what
// follows it next, as u.
func (s *Service) Replay(ctx context.Context, u *sluice.User, org, name string, id int64, after string) (*sluice.Webhook, error) {
	d, _, err := s.admin(ctx, u, org, name)
	if err != nil {
		return nil, err
	}
	p, err := sluice.ParsePosition(after)
	if err != nil {
		return nil, sluice.Errorf(sluice.CodeInvalid, "after: %s", sluice.ErrorMessage(err))
	}
	if err := s.checkAfter(ctx, d, p); err != nil {
		return nil, err
	}
	if err := s.store.ReplayWebhook(ctx, d, id, p, s.deliverer(ctx, u)); err != nil {
		return nil, err
	}
	return s.store.Webhook(ctx, d, id)
}

// MaxGrace is the longest a rotated secret may keep signing.
const MaxGrace = 7 * 24 * time.Hour

// Rotate gives webhook id of org/name a new signing secret, returned in
// text form (shown this once), and makes it deliver as u, who holds the
// secret; the previous one keeps signing along for grace (0: it stops at
// once) until the time it returns, as stored (zero: none kept).
func (s *Service) Rotate(ctx context.Context, u *sluice.User, org, name string, id int64, grace time.Duration) (string, time.Time, error) {
	d, _, err := s.admin(ctx, u, org, name)
	if err != nil {
		return "", time.Time{}, err
	}
	if grace < 0 || grace > MaxGrace {
		return "", time.Time{}, sluice.Errorf(sluice.CodeInvalid, "grace: want 0 to %s", MaxGrace)
	}
	secret := newSecret()
	until, err := s.store.RotateWebhookSecret(ctx, d, id, func(id int64) ([]byte, error) { return s.keys.Seal(id, secret) }, grace, s.deliverer(ctx, u))
	if err != nil {
		return "", time.Time{}, err
	}
	return showSecret(secret), until, nil
}

// Delete deletes webhook id of org/name.
func (s *Service) Delete(ctx context.Context, u *sluice.User, org, name string, id int64) error {
	d, _, err := s.admin(ctx, u, org, name)
	if err != nil {
		return err
	}
	return s.store.DeleteWebhook(ctx, d, id)
}

// checkCreator checks, against Postgres and bypassing caches, that the
// creator of w still exists, that the API token it was made with (if any)
// is unrevoked, that the key of the JWT it was made with (if any) was not
// removed from the key set (as a replica recorded it, see
// Deliverer.revokeKeys), and that the creator can read w's database. Its
// errors (Unauthenticated, Forbidden, NotFound) say what is missing.
func checkCreator(ctx context.Context, store *postgres.DB, w *sluice.Webhook) error {
	u, err := store.UserByID(ctx, w.CreatorID)
	if sluice.ErrorCode(err) == sluice.CodeNotFound {
		return sluice.Errorf(sluice.CodeUnauthenticated, "user %s was deleted", w.CreatorName)
	}
	if err != nil {
		return err
	}
	if w.CreatorTokenID != 0 {
		ok, err := store.TokenValid(ctx, u.ID, w.CreatorTokenID)
		if err != nil {
			return err
		}
		if !ok {
			return sluice.Errorf(sluice.CodeUnauthenticated, "the API token %s made it with was revoked", u.Name)
		}
	}
	if w.CreatorJWTKey != "" {
		removed, err := store.JWTKeyRemoved(ctx, w.CreatorJWTKey)
		if err != nil {
			return err
		}
		if removed {
			return sluice.Errorf(sluice.CodeUnauthenticated, "the key that signed the JWT %s made it with was removed from the key set (jwt_jwks_file/jwt_jwks_url)", u.Name)
		}
	}
	d, err := store.DatabaseByID(ctx, w.Database.ID)
	if err != nil {
		return err
	}
	if d.Epoch != w.Database.Epoch {
		return sluice.ErrNoDatabase(d.Org, d.Name)
	}
	if u.Superuser {
		return nil
	}
	role, err := store.Role(ctx, u.ID, d.ID)
	if err != nil {
		return err
	}
	if role < sluice.RoleRead {
		return sluice.Errorf(sluice.CodeForbidden, "the role of %s on %s is now %s; a webhook needs read", u.Name, d.Path(), role)
	}
	return nil
}
