package cli

import (
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/duration"
)

// cell is one table cell: its text and the colour it is painted in.
type cell struct{ text, color string }

func plain(s string) cell { return cell{text: s} }

// table lines up columns by the width of their plain text, so that colour
// (escape sequences the terminal does not show) never shifts a column.
type table struct {
	header []string
	rows   [][]cell
	widths []int
}

const columnGap = "   " // as kubectl

func newTable(header ...string) *table {
	t := &table{header: header, widths: make([]int, len(header))}
	t.fit(headerCells(header))
	return t
}

func headerCells(h []string) []cell {
	out := make([]cell, len(h))
	for i, s := range h {
		out[i] = plain(s)
	}
	return out
}

func (t *table) fit(row []cell) {
	for i, c := range row {
		if i < len(t.widths) {
			t.widths[i] = max(t.widths[i], utf8.RuneCountInString(c.text))
		}
	}
}

func (t *table) add(row ...cell) {
	t.fit(row)
	t.rows = append(t.rows, row)
}

// write prints the header and the rows.
func (t *table) write(w io.Writer, color bool) error {
	var b strings.Builder
	t.line(&b, headerCells(t.header), false)
	for _, r := range t.rows {
		t.line(&b, r, color)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeRow prints one more row in the columns already printed, widening
// them if needed (a --watch).
func (t *table) writeRow(w io.Writer, color bool, row ...cell) error {
	t.fit(row)
	var b strings.Builder
	t.line(&b, row, color)
	_, err := io.WriteString(w, b.String())
	return err
}

func (t *table) line(b *strings.Builder, row []cell, color bool) {
	var l strings.Builder
	for i, c := range row {
		l.WriteString(paint(color, c.color, c.text))
		if i < len(row)-1 {
			l.WriteString(strings.Repeat(" ", t.widths[i]-utf8.RuneCountInString(c.text)))
			l.WriteString(columnGap)
		}
	}
	b.WriteString(strings.TrimRight(l.String(), " "))
	b.WriteString("\n")
}

// age is kubectl's AGE: the time since t, "<unknown>" when t is zero.
func age(now time.Time, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// parseTime reads a metav1.Time as written in JSON ("" is zero).
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t
}
