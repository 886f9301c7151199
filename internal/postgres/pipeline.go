package postgres

import (
	"math/bits"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// pipeline holds the statements a transaction's Writers have queued and
// not sent yet (Writer.pending). Rows queued one after another for one
// table go as one multi-row INSERT: a group-commit batch of single-document
// writes then sends one INSERT for all its documents and one for all its
// change rows, instead of one of each per document. Postgres pays for each
// statement, whatever its rows (binding and starting it, and parsing the
// capture triggers' WHEN condition again): with eight concurrent writers
// of one document each, sharing statements took a sixth off Postgres's
// CPU per document (docs/benchmarks.md, "Measured choices in the code").
//
// A run of rows is sent in statements of 1, 2, 4, … maxMergedRows rows
// (its count's binary digits), so that a table has a few statement texts,
// each prepared once per connection, however the runs vary.
type pipeline struct {
	stmts []queuedStatement
}

// queuedStatement is one statement of a pipeline: sql with args, or, when
// insert is set, rows of that insert: args holds insert.cols values for
// each of them.
type queuedStatement struct {
	sql    string
	args   []any
	insert *rowInsert
	rows   int
}

// rowInsert is an INSERT of rows into table's columns cols, every column
// given by a parameter.
type rowInsert struct {
	// head is "INSERT INTO table (cols) VALUES ".
	head string
	cols int
}

func newRowInsert(table string, cols []string) *rowInsert {
	var b strings.Builder
	b.WriteString("INSERT INTO " + table + " (")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgx.Identifier{c}.Sanitize())
	}
	b.WriteString(") VALUES ")
	return &rowInsert{head: b.String(), cols: len(cols)}
}

// sql returns the statement inserting n rows.
func (ins *rowInsert) sql(n int) string {
	var b strings.Builder
	b.Grow(len(ins.head) + n*ins.cols*6)
	b.WriteString(ins.head)
	p := 1
	for r := range n {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range ins.cols {
			if c > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(p))
			p++
		}
		b.WriteByte(')')
	}
	return b.String()
}

// maxMergedRows caps the rows of one statement: a batch has at most
// maxBatch commits, and a Writer sends copyThreshold rows or more by COPY.
const maxMergedRows = 64

// maxRows is the most rows of ins one statement carries: at most
// maxMergedRows, a power of two, within Postgres's 65,535 parameters.
func (ins *rowInsert) maxRows() int {
	n := maxMergedRows
	for n > 1 && n*ins.cols > 65535 {
		n /= 2
	}
	return n
}

// queue adds a statement.
func (p *pipeline) queue(sql string, args ...any) {
	p.stmts = append(p.stmts, queuedStatement{sql: sql, args: args})
}

// queueRow adds a row of ins, to the statement before when that is rows
// of the same insert with room for it.
func (p *pipeline) queueRow(ins *rowInsert, row []any) {
	if n := len(p.stmts); n > 0 {
		last := &p.stmts[n-1]
		if last.insert != nil && last.insert.head == ins.head && last.rows < ins.maxRows() {
			last.args = append(last.args, row...)
			last.rows++
			return
		}
	}
	args := make([]any, 0, len(row)*4)
	p.stmts = append(p.stmts, queuedStatement{insert: ins, args: append(args, row...), rows: 1})
}

// Len returns the number of statements batch will send.
func (p *pipeline) Len() int {
	n := 0
	for _, s := range p.stmts {
		if s.insert != nil {
			n += bits.OnesCount(uint(s.rows))
		} else {
			n++
		}
	}
	return n
}

// reset drops every statement queued.
func (p *pipeline) reset() { p.stmts = nil }

// batch returns the statements queued as a pgx.Batch, Len of them, and
// empties p.
func (p *pipeline) batch() *pgx.Batch {
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, p.Len()+3)}
	for _, s := range p.stmts {
		if s.insert == nil {
			b.Queue(s.sql, s.args...)
			continue
		}
		// Largest statements first: 13 rows go as 8, 4 and 1.
		args, cols := s.args, s.insert.cols
		for size := s.insert.maxRows(); size > 0; size /= 2 {
			if s.rows&size != 0 {
				b.Queue(s.insert.sql(size), args[:size*cols]...)
				args = args[size*cols:]
			}
		}
	}
	p.reset()
	return b
}
