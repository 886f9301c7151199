package graph_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/daemontest"
)

// TestBigIntLiterals: BigInt is of any size, and a literal too large for
// 64 bits is the same value written as a literal, a string or a variable:
// in a mutation's documents, a filter (of a query, of a subscription), a
// list filter and a variable's default. Past the bounds of a filter's
// numbers it is refused with the message a variable gets, naming the
// place in the filter.
func TestBigIntLiterals(t *testing.T) {
	t.Parallel()
	d := daemontest.Start(t)
	d.CreateDatabase(t, "big", `type Account { name: String! balance: BigInt limits: [BigInt!] }`)
	path := "/api/graphql/admin/big"
	const huge = "123456789012345678901234567890" // 30 digits

	// A subscription whose filter holds one, open before the insert.
	s := d.MustOpenStream(t, daemontest.Admin(), daemontest.StreamRequest{
		Method: http.MethodPost, Path: path, Header: []string{"Accept", "text/event-stream"},
		Body: `{"query":"subscription { Account_added(filter: {balance: {gt: 9223372036854775808}}) { name balance } }"}`,
	})
	if f := s.Next(); f.String() != ": connected" {
		t.Fatalf("first frame %q", f)
	}

	gql(t, d, path, `mutation { Account_insert(documents: [
		{_id: "a", name: "A", balance: `+huge+`, limits: [9223372036854775808, -9223372036854775809, 5]},
		{_id: "b", name: "B", balance: 9223372036854775807, limits: [-123456789012345678901234567890]}]) }`, nil).mustOK(t)
	if got, want := s.Event().Field("data"), `{"data":{"Account_added":{"name":"A","balance":"`+huge+`"}}}`; got != want {
		t.Fatalf("subscription: got %s, want %s", got, want)
	}
	res := gql(t, d, path, `{ Account(orderBy: {name: ASC}) { name balance limits } }`, nil).mustOK(t)
	if got, want := string(res.Data), `{"Account":[{"name":"A","balance":"`+huge+`","limits":["9223372036854775808","-9223372036854775809","5"]},`+
		`{"name":"B","balance":"9223372036854775807","limits":["-123456789012345678901234567890"]}]}`; got != want {
		t.Fatalf("documents: got %s, want %s", got, want)
	}

	for _, tc := range []struct{ query, want string }{
		{`{ Account(filter: {balance: {gt: 9223372036854775808}}) { name } }`, `["A"]`},
		{`{ Account(filter: {balance: {eq: ` + huge + `}}) { name } }`, `["A"]`},
		{`{ Account(filter: {balance: {eq: "` + huge + `"}}) { name } }`, `["A"]`},
		{`{ Account(filter: {balance: {lt: -9223372036854775809}}) { name } }`, `[]`},
		{`{ Account(filter: {limits: {someHave: {lt: -9223372036854775809}}}) { name } }`, `["B"]`},
		{`query($b: BigInt = ` + huge + `) { Account(filter: {balance: {eq: $b}}) { name } }`, `["A"]`},
		// Of one shape, differing only in a string: the second is not
		// validated again (the query cache), and reads the literal alike.
		{`{ Account(filter: {balance: {gt: 9223372036854775808}, name: {eq: "A"}}) { name } }`, `["A"]`},
		{`{ Account(filter: {balance: {gt: 9223372036854775808}, name: {eq: "B"}}) { name } }`, `[]`},
	} {
		res := gql(t, d, path, tc.query, nil).mustOK(t)
		var data struct{ Account []struct{ Name string } }
		if err := json.Unmarshal(res.Data, &data); err != nil {
			t.Fatal(err)
		}
		names := []string{}
		for _, a := range data.Account {
			names = append(names, a.Name)
		}
		if got, _ := json.Marshal(names); string(got) != tc.want {
			t.Errorf("%s: got %s, want %s", tc.query, got, tc.want)
		}
	}

	// Past a filter's bound on numbers: refused, naming the place, as a
	// variable of that value is.
	long := strings.Repeat("9", 1001)
	_, lit := gqlAny(t, d, path, `{ Account(filter: {balance: {gt: `+long+`}}) { name } }`, nil)
	refused(t, "literal of 1001 digits", http.StatusOK, lit, "filter.balance.gt: the number is longer than 1000 characters")
	_, byVar := gqlAny(t, d, path, `query($b: BigInt) { Account(filter: {balance: {gt: $b}}) { name } }`, map[string]any{"b": json.Number(long)})
	refused(t, "variable of 1001 digits", http.StatusOK, byVar, "filter.balance.gt: the number is longer than 1000 characters")
	if lit.Errors[0].Message != byVar.Errors[0].Message {
		t.Errorf("a literal and a variable are refused differently: %q, %q", lit.Errors[0].Message, byVar.Errors[0].Message)
	}
}

// TestBigIntFilterNumberForms: a BigInt filter value is written as a
// document's BigInt is, the same rule for a literal and a variable:
// digits with at most a zero fraction (100.0), or a string of digits; an
// exponent (1E2) or a fraction is refused by both. Found by review: a
// literal took 1E2 and 1.5e1 while a variable refused them, and a
// variable refused 100.0, which a literal and a document take.
func TestBigIntFilterNumberForms(t *testing.T) {
	t.Parallel()
	st := newStack(t, `type P { b: BigInt } type Written { b: BigInt }`)
	st.insert(t, `[{"@type":"P","@id":"a","b":"100"},{"@type":"P","@id":"z","b":"-100"}]`)
	for _, c := range []struct {
		form string
		ok   bool
	}{
		{`100`, true}, {`100.0`, true}, {`100.000`, true}, {`-100.0`, true}, {`"100"`, true},
		{`1E2`, false}, {`1e2`, false}, {`1.5e1`, false}, {`1.0e2`, false}, {`100.5`, false}, {`"1E2"`, false}, {`"100.0"`, false},
	} {
		lit := st.query(t, `{ P_aggregate(filter: {b: {eq: `+c.form+`}}) { count } }`, nil)
		var f any
		d := json.NewDecoder(strings.NewReader(`{"b":{"eq":` + c.form + `}}`))
		d.UseNumber()
		if err := d.Decode(&f); err != nil {
			t.Fatal(err)
		}
		vr := st.query(t, `query($f: P_Filter) { P_aggregate(filter: $f) { count } }`, map[string]any{"f": f})
		doc := st.query(t, `mutation($j: JSON!) { _insertDocuments(json: $j) }`, map[string]any{"j": `{"@type":"Written","b":` + c.form + `}`})
		for _, r := range []struct {
			what string
			res  gqlResult
		}{{"a literal", lit}, {"a variable", vr}, {"a document", doc}} {
			if ok := len(r.res.Errors) == 0; ok != c.ok {
				t.Errorf("%s as %s: %s, want accepted %v", c.form, r.what, r.res.raw, c.ok)
			}
		}
		if c.ok && (string(lit.Data) != `{"P_aggregate":{"count":1}}` || string(vr.Data) != string(lit.Data)) {
			t.Errorf("%s: a literal selects %s, a variable %s; want one document each", c.form, lit.Data, vr.Data)
		}
	}
}
