package engine

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/schema"
)

// TestRegrouped: which schema changes change the document classes under a
// stream's selection (a class leaves, or one that had documents joins),
// and which leave them as they were.
func TestRegrouped(t *testing.T) {
	const zoo = "interface Animal { name: String! }\ntype Cat implements Animal { name: String! }\ntype Dog implements Animal { name: String! }\n"
	for _, c := range []struct {
		name, before, after string
		under               []string
		want                string // Regroup's How, "" for none
	}{
		{"field added", zoo, zoo + "type Note { t: String }", []string{"Animal"}, ""},
		{"new implementation", zoo, zoo + "type Bird implements Animal { name: String! }", []string{"Animal"}, ""},
		{"interface made", "type Cat { name: String! }", "interface Animal { name: String! }\ntype Cat implements Animal { name: String! }", []string{"Animal"}, "made Cat implement Animal"},
		{"cat dropped", zoo, "interface Animal { name: String! }\ntype Dog implements Animal { name: String! }", []string{"Animal"}, "dropped class Cat"},
		{"cat leaves", zoo, "interface Animal { name: String! }\ntype Cat { name: String! }\ntype Dog implements Animal { name: String! }", []string{"Animal"}, "made Cat stop implementing Animal"},
		{"cat joins", "interface Animal { name: String! }\ntype Cat { name: String! }\ntype Dog implements Animal { name: String! }", zoo, []string{"Animal"}, "made Cat implement Animal"},
		{"cat abstract", zoo, "interface Animal { name: String! }\ninterface Cat implements Animal { name: String! }\ntype Dog implements Animal { name: String! }", []string{"Animal"}, "made Cat an interface"},
		{"cat subdocument", zoo, "interface Animal { name: String! }\ntype Cat @subdocument { name: String! }\ntype Dog implements Animal { name: String! }", []string{"Animal"}, "made Cat a subdocument type"},
		{"other interface", zoo + "interface Pet { name: String! }", "interface Animal { name: String! }\ninterface Pet { name: String! }\ntype Cat implements Animal & Pet { name: String! }\ntype Dog implements Animal { name: String! }", []string{"Animal"}, ""},
		{"stream of the class", zoo, "interface Animal { name: String! }\ntype Dog implements Animal { name: String! }", []string{"Cat"}, "dropped class Cat"},
		{"stream of another class", zoo, "interface Animal { name: String! }\ntype Dog implements Animal { name: String! }", []string{"Dog"}, ""},
		{"every class, one dropped", zoo, "interface Animal { name: String! }\ntype Dog implements Animal { name: String! }", nil, "dropped class Cat"},
		{"every class, one added", zoo, zoo + "type Bird { name: String! }", nil, ""},
		{"every class, one leaves an interface", zoo, "interface Animal { name: String! }\ntype Cat { name: String! }\ntype Dog implements Animal { name: String! }", nil, ""},
	} {
		before, err := schema.Parse(c.before)
		if err != nil {
			t.Fatal(c.name, err)
		}
		after, err := schema.Parse(c.after)
		if err != nil {
			t.Fatal(c.name, err)
		}
		got := ""
		if rg := regrouped(before, after, c.under); rg != nil {
			got = rg.How
		}
		if got != c.want {
			t.Errorf("%s: regrouped %q, want %q", c.name, got, c.want)
		}
	}
}

// TestOwnLeft: a class selected without its children is left only by a
// change that takes the class itself out of the document classes.
func TestOwnLeft(t *testing.T) {
	const pets = "interface Pet @concrete { name: String! }\ninterface Animal { name: String! }\ntype Cat implements Pet & Animal { name: String! }\n"
	for _, c := range []struct {
		name, before, after string
		classes             []string
		want                string // Regroup's How, "" for none
	}{
		{"a child leaves", pets, "interface Pet @concrete { name: String! }\ninterface Animal { name: String! }\ntype Cat { name: String! }\n", []string{"Pet", "Animal"}, ""},
		{"a child joins", "interface Pet @concrete { name: String! }\ninterface Animal { name: String! }\ntype Cat { name: String! }\n", pets, []string{"Pet", "Animal"}, ""},
		{"a child dropped", pets, "interface Pet @concrete { name: String! }\ninterface Animal { name: String! }\n", []string{"Pet", "Animal"}, ""},
		{"made abstract", pets, "interface Pet { name: String! }\ninterface Animal { name: String! }\ntype Cat implements Pet & Animal { name: String! }\n", []string{"Pet"}, "made Pet an interface"},
		{"the class dropped", pets, "interface Animal { name: String! }\ntype Cat implements Animal { name: String! }\n", []string{"Animal", "Pet"}, "dropped class Pet"},
		{"a subdocument type", pets, "type Pet @subdocument { name: String! }\ninterface Animal { name: String! }\ntype Cat implements Animal { name: String! }\n", []string{"Pet"}, "made Pet a subdocument type"},
	} {
		before, err := schema.Parse(c.before)
		if err != nil {
			t.Fatal(c.name, err)
		}
		after, err := schema.Parse(c.after)
		if err != nil {
			t.Fatal(c.name, err)
		}
		got := ""
		if rg := OwnLeft(before, after, c.classes); rg != nil {
			got = rg.How
		}
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
