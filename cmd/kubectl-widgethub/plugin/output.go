package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/widgethub/widgethub/api/v1alpha1"
)

// output is how clusters and widgets print, as kubectl get does: a table
// (with more columns when wide, without its header line with --no-headers),
// or the objects as a kubectl List in JSON or YAML.
type output struct {
	format    string
	noHeaders bool
}

// The values of --output.
const (
	outputWide = "wide"
	outputJSON = "json"
	outputYAML = "yaml"
)

func (o *output) addFlags(f *pflag.FlagSet) {
	f.StringVarP(&o.format, "output", "o", "", "Output format: wide (a table with more columns), json or yaml (a kubectl List). Default: a table.")
	f.BoolVar(&o.noHeaders, "no-headers", false, "Print tables without their header line (json and yaml ignore it).")
}

// validate refuses an unknown --output before any cluster is contacted.
func (o output) validate() error {
	switch o.format {
	case "", outputWide, outputJSON, outputYAML:
		return nil
	}
	return withCode(ExitUsage, "--output %q is not an output format: use wide, json or yaml, or leave it out for a table", o.format)
}

func (o output) wide() bool { return o.format == outputWide }

// list reports whether the objects are printed as a List rather than a table.
func (o output) list() bool { return o.format == outputJSON || o.format == outputYAML }

// newTable starts a table on out with its header line, unless --no-headers.
func (o output) newTable(out io.Writer, header ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	if !o.noHeaders {
		row(tw, header...)
	}
	return tw
}

// row writes one line of a table. Cells hold what members chose (versions,
// names, condition statuses), so each is printable and bounded first: a tab
// or newline of a member cannot shift the table, nor an escape sequence reach
// the terminal.
func row(tw *tabwriter.Writer, cells ...string) {
	for i, c := range cells {
		cells[i] = v1alpha1.Printable(c, maxCell)
	}
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
}

// printList writes items (from listItem) as a kubectl List in JSON or YAML.
func (o output) printList(out io.Writer, items []map[string]any) error {
	if items == nil {
		items = []map[string]any{}
	}
	list := map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}, "items": items}
	if o.format == outputYAML {
		doc, err := yaml.Marshal(list)
		if err != nil {
			return fmt.Errorf("print YAML: %w", err)
		}
		_, err = out.Write(doc)
		return err
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "    ")
	enc.SetEscapeHTML(false)
	return enc.Encode(list)
}

// listItem is obj as a List prints it: its fields with its apiVersion and
// kind, without managedFields (as kubectl prints it), every string and map
// key printable and bounded (printableValue).
func listItem(obj object) (map[string]any, error) {
	gvk, err := kindOf(obj)
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "managedFields")
	}
	return printableValue(m).(map[string]any), nil
}

// printableValue is v, a value of an unstructured object, with each string
// and map key as printableString makes it.
func printableValue(v any) any {
	switch v := v.(type) {
	case string:
		return printableString(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[printableString(k)] = printableValue(e)
		}
		return out
	case []any:
		for i := range v {
			v[i] = printableValue(v[i])
		}
	}
	return v
}

// printableString is s as JSON and YAML print it. The encoders escape ASCII
// control characters themselves, so s is kept as it is when it is at most
// maxValue bytes of UTF-8 whose other runes a terminal shows as themselves;
// else it is printed as a table cell is (v1alpha1.Printable: Go escapes, cut
// to maxValue bytes): the encoders would pass a bidi override, a zero-width
// or a private-use character on to the terminal.
func printableString(s string) string {
	if len(s) <= maxValue && utf8.ValidString(s) && !strings.ContainsFunc(s, hidden) {
		return s
	}
	return v1alpha1.Printable(s, maxValue)
}

// hidden reports whether r is a rune beyond ASCII that a terminal would not
// show as itself.
func hidden(r rune) bool { return r >= utf8.RuneSelf && !unicode.IsPrint(r) }

// The bounds of what the plugin prints of text it did not choose: a table
// cell, a string of a List item, and an error (which may quote a member's
// answer).
const (
	maxCell  = v1alpha1.MaxNameLength
	maxValue = 4 * v1alpha1.MaxMessageLength
	maxError = 4 * v1alpha1.MaxMessageLength
)

// printable is text the plugin did not choose (an error, which may quote a
// member's answer; names a member listed) as the plugin prints it.
func printable(text string) string { return v1alpha1.Printable(text, maxError) }

// age prints how long ago t was, as kubectl does.
func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}
