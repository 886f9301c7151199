package graph_test

import (
	"strconv"
	"strings"
	"testing"
)

// TestFloatAverage: the mean of Float fields is computed without passing
// the range of a float on the way (a sum or a sum of squares that would
// overflow while the mean fits), and the mean of one value is that value;
// a sum past the range is an error saying so.
func TestFloatAverage(t *testing.T) {
	t.Parallel()
	st := newStack(t, "type M { f: Float g: String }")
	st.insert(t, `[{"@type":"M","@id":"a","f":1.5,"g":"big"},{"@type":"M","@id":"b","f":1e308,"g":"big"},{"@type":"M","@id":"c","f":1e308,"g":"big"},
		{"@type":"M","@id":"d","f":1.2345678901234567,"g":"one"},{"@type":"M","@id":"e","f":0.1,"g":"small"},{"@type":"M","@id":"f","f":0.2,"g":"small"}]`)
	for _, c := range []struct{ query, want string }{
		{`{ M_aggregate(filter: {g: {eq: "big"}}) { avg { f } } }`, `{"M_aggregate":{"avg":{"f":6.666666666666666e+307}}}`},
		{`{ M_aggregate(filter: {g: {eq: "one"}}) { avg { f } min { f } } }`, `{"M_aggregate":{"avg":{"f":1.2345678901234567},"min":{"f":1.2345678901234567}}}`},
		{`{ M_aggregate(filter: {g: {eq: "small"}}) { avg { f } sum { f } } }`, `{"M_aggregate":{"avg":{"f":0.15},"sum":{"f":0.3}}}`},
	} {
		if res := st.query(t, c.query, nil).mustOK(t); string(res.Data) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.query, res.Data, c.want)
		}
	}
	res := st.query(t, `{ M_aggregate(filter: {g: {eq: "big"}}) { sum { f } } }`, nil)
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Message, "an aggregate of M is out of the range of its type (sum.f: a Float past ±1.8e308)") {
		t.Errorf("a sum past the largest float: %s", res.raw)
	}
}

// TestAverageRoundedOnce: avg is the exact mean rounded once to a float.
// Postgres' avg of numeric rounds to about 16 digits and its float8 cast
// rounds again: 238/29 answered 8.206896551724137, one unit in the last
// place below the float nearest it. No value: null.
func TestAverageRoundedOnce(t *testing.T) {
	t.Parallel()
	st := newStack(t, "type N { v: Int b: BigInt f: Float }")
	docs := strings.Repeat(`{"@type":"N","v":8,"b":"8","f":8},`, 28) + `{"@type":"N","v":14,"b":"14","f":14}`
	st.insert(t, "["+docs+"]")
	want := strconv.FormatFloat(238.0/29.0, 'g', -1, 64) // 8.206896551724139
	res := st.query(t, `{ N_aggregate { avg { v b f } } none: N_aggregate(filter: {v: {eq: 1}}) { avg { v f } } }`, nil).mustOK(t)
	if got := string(res.Data); got != `{"N_aggregate":{"avg":{"v":`+want+`,"b":`+want+`,"f":`+want+`}},"none":{"avg":{"v":null,"f":null}}}` {
		t.Errorf("the mean of 28 eights and a fourteen: %s, want %s each", got, want)
	}
}

// TestBigIntSumPastItsRange: a sum of BigInts past what Postgres' numeric
// holds (131,072 digits) is an error naming that range, not a Float's.
func TestBigIntSumPastItsRange(t *testing.T) {
	t.Parallel()
	st := newStack(t, "type Acc { big: BigInt }")
	nines := strings.Repeat("9", 131072)
	st.insert(t, `[{"@type":"Acc","big":"`+nines+`"},{"@type":"Acc","big":"`+nines+`"}]`)
	res := st.query(t, `{ Acc_aggregate { sum { big } } }`, nil)
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Message, "(sum.big: a number past 131,072 digits)") {
		t.Errorf("a BigInt sum past numeric's range: %.300s", res.raw)
	}
}

// TestFloatSumExact: a Float sum is the exact sum of the values rounded
// once, whatever the order Postgres reads the rows in, and only a result
// past the largest float is out of range, an error naming that sum alone.
// Found by review: the sum was a float8 sum, rounded at every row, so
// 1e16, 1 and -1e16 summed to 0, and to 1 once rewriting the 1 (the same
// value) moved its row; 1e308, 1e308 and -1e308 overflowed in one order
// and not in another; and the error named every sum and avg selected,
// each with a range it does not have ("avg.f: a number past 131,072
// digits").
func TestFloatSumExact(t *testing.T) {
	t.Parallel()
	st := newStack(t, `type P { f: Float n: String }`)
	st.insert(t, `[{"@type":"P","@id":"a","f":1e16,"n":"cancel"},{"@type":"P","@id":"b","f":1,"n":"cancel"},{"@type":"P","@id":"c","f":-1e16,"n":"cancel"},
		{"@type":"P","@id":"d","f":1e308,"n":"big"},{"@type":"P","@id":"e","f":1e308,"n":"big"},{"@type":"P","@id":"f","f":-1e308,"n":"big"}]`)
	cases := []struct{ query, want string }{
		{`{ P_aggregate(filter: {n: {eq: "cancel"}}) { count sum { f } avg { f } } }`, `{"P_aggregate":{"count":3,"sum":{"f":1},"avg":{"f":0.3333333333333333}}}`},
		{`{ P_aggregate(filter: {n: {eq: "big"}}) { count sum { f } avg { f } } }`, `{"P_aggregate":{"count":3,"sum":{"f":1e+308},"avg":{"f":3.333333333333333e+307}}}`},
	}
	check := func(when string) {
		t.Helper()
		for _, c := range cases {
			if res := st.query(t, c.query, nil); string(res.Data) != c.want || len(res.Errors) > 0 {
				t.Errorf("%s: %s:\n got %s\nwant %s", when, c.query, res.raw, c.want)
			}
		}
	}
	check("as inserted")
	// Rewriting a row with the same value moves it to the table's end.
	st.query(t, `mutation { P_replace(documents: [{_id: "P/a", f: 1e16, n: "cancel"}, {_id: "P/d", f: 1e308, n: "big"}]) }`, nil).mustOK(t)
	check("after rewriting the first rows")
	st.query(t, `mutation { P_replace(documents: [{_id: "P/f", f: 1e308, n: "big"}]) }`, nil).mustOK(t)
	res := st.query(t, `{ P_aggregate(filter: {n: {eq: "big"}}) { sum { f } avg { f } } }`, nil)
	if len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Message, "an aggregate of P is out of the range of its type (sum.f: a Float past ±1.8e308)") {
		t.Errorf("a sum of three 1e308s: %s", res.raw)
	}
}
