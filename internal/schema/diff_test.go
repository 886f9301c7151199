package schema

import (
	"fmt"
	"strings"
	"testing"
)

// changeString prints a change on one line for comparisons.
func changeString(c Change) string {
	d := ""
	if c.Destructive {
		d = " destructive"
	}
	return fmt.Sprintf("%s %s.%s%s: %s", c.Kind, c.Class, c.Field, d, c.Reason)
}

func TestDiff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		old, new string
		want     []string
	}{
		{"identical", representative, representative, nil},
		{"descriptions and order of fields do not matter",
			"type A { a: Int b: String }", "\"doc\" type A { \"b\" b: String a: Int }", nil},
		{"indexes added and dropped, inherited ones on each table",
			`interface I { x: Int } type A implements I @index(fields: ["b", "x"]) { b: String @index c: Int }`,
			`interface I { x: Int @index } type A implements I { b: String c: Int @index } type B implements I`, []string{
				"AddIndex A.x: adds an index on A(x)",
				"AddIndex A.c: adds an index on A(c)",
				"DropIndex A.b, x: drops the index on A(b, x)",
				"DropIndex A.b: drops the index on A(b)",
				"AddClass B.: adds class B",
			}},
		{"from empty", "", "type A { a: Int }\nenum E { X }\ninterface I { i: Int }\ntype S @subdocument { s: Int }", []string{
			"AddEnum E.: adds enum E",
			"AddClass A.: adds class A",
			"AddClass I.: adds abstract class I",
			"AddClass S.: adds subdocument S",
		}},
		{"to empty", "type A { a: Int }\nenum E { X }\ninterface I { i: Int }\ntype S @subdocument { s: Int }", "", []string{
			"DropClass A. destructive: drops class A and its documents",
			"DropClass I.: drops abstract class I",
			"DropClass S. destructive: drops subdocument S and its values in documents",
			"DropEnum E. destructive: drops enum E; stored values of it become invalid",
		}},
		{"fields", `type A { keep: Int drop: Int alter: Int list: Int req: Int relax: Int! hide: Int both: Int }`,
			`type A { keep: Int alter: String list: [Int] req: Int! relax: Int hide: Int @private both: [Int]! @protected(role: "write") opt: Int must: Int! }`, []string{
				"AlterField A.alter destructive: changes field A.alter from Int to String; its stored values are dropped",
				"AlterField A.list destructive: changes field A.list from Int to [Int!]; its stored values are dropped",
				"RequireField A.req: makes field A.req required; existing A values must have it",
				"RelaxField A.relax: makes field A.relax optional",
				"ChangeFieldRole A.hide: changes the role needed to read A.hide from read to admin",
				"AlterField A.both destructive: changes field A.both from Int to [Int!]!; its stored values are dropped",
				"ChangeFieldRole A.both: changes the role needed to read A.both from read to write",
				"AddField A.opt: adds field A.opt Int",
				"AddRequiredField A.must: adds required field A.must Int!; existing A values must have it",
				"DropField A.drop destructive: drops field A.drop and its values",
			}},
		{"reference target changes", "type A { b: B }\ntype B { x: Int }\ntype C { x: Int }", "type A { b: C }\ntype B { x: Int }\ntype C { x: Int }", []string{
			"AlterField A.b destructive: changes field A.b from B to C; its stored values are dropped",
		}},
		{"reference widened to an interface its classes implement: kept",
			"interface Named { name: String }\ntype Person implements Named { name: String }\ntype Boss implements Named { name: String }\ntype A { b: Person c: [Person!] d: Person e: Person! }",
			"interface Named { name: String }\ntype Person implements Named { name: String }\ntype Boss implements Named { name: String }\ntype A { b: Named c: [Named!] d: Named! e: Named }", []string{
				"WidenReference A.b: changes field A.b from Person to Named; its stored references are kept (each class they may point to is a Named)",
				"WidenReference A.c: changes field A.c from [Person!] to [Named!]; its stored references are kept (each class they may point to is a Named)",
				"WidenReference A.d: changes field A.d from Person to Named!; its stored references are kept (each class they may point to is a Named)",
				"RequireField A.d: makes field A.d required; existing A values must have it",
				"WidenReference A.e: changes field A.e from Person! to Named; its stored references are kept (each class they may point to is a Named)",
				"RelaxField A.e: makes field A.e optional",
			}},
		{"reference narrowed, made a list, or widened to what a class leaves: dropped",
			"interface Named { name: String }\ntype Person implements Named { name: String }\ntype Boss implements Named { name: String }\ntype A { b: Named c: Person d: Person }",
			"interface Named { name: String }\ntype Person { name: String }\ntype Boss implements Named { name: String }\ntype A { b: Boss c: [Person!] d: Named }", []string{
				"ChangeParents Person. destructive: makes Person no longer inherit from Named; references to Named may point to Person documents",
				"AlterField A.b destructive: changes field A.b from Named to Boss; its stored values are dropped",
				"AlterField A.c destructive: changes field A.c from Person to [Person!]; its stored values are dropped",
				"AlterField A.d destructive: changes field A.d from Person to Named; its stored values are dropped",
			}},
		{"enum becomes a class", "enum B { X }\ntype A { b: B }", "type B { x: Int }\ntype A { b: B }", []string{
			"AddClass B.: adds class B",
			"AlterField A.b destructive: changes field A.b from enum B to reference to B; its stored values are dropped",
			"DropEnum B. destructive: drops enum B; stored values of it become invalid",
		}},
		{"subdocument fields", "type S @subdocument { a: Int b: Int }", "type S @subdocument { a: Float c: Int }", []string{
			"AlterField S.a destructive: changes field S.a from Int to Float; its stored values are dropped",
			"AddField S.c: adds field S.c Int",
			"DropField S.b destructive: drops field S.b and its values",
		}},
		{"inherited fields change in every descendant",
			"interface Animal { name: String legs: Int }\ntype Dog implements Animal { breed: String }",
			"interface Animal { name: String! tail: Boolean }\ntype Dog implements Animal { breed: String }", []string{
				"RequireField Animal.name: makes field Animal.name required; existing Animal values must have it",
				"AddField Animal.tail: adds field Animal.tail Boolean",
				"DropField Animal.legs: drops field Animal.legs",
				"RequireField Dog.name: makes field Dog.name required; existing Dog values must have it",
				"AddField Dog.tail: adds field Dog.tail Boolean",
				"DropField Dog.legs destructive: drops field Dog.legs and its values",
			}},
		{"abstract field altered",
			"interface I { x: Int }", "interface I { x: String }", []string{
				"AlterField I.x: changes field I.x from Int to String",
			}},
		{"enums", "enum E { A B C }\nenum F { X }", "enum E { C D A }\nenum F { X }\nenum G { Y }", []string{
			"AddEnumValue E.D: adds value D to enum E",
			"AddEnum G.: adds enum G",
			"DropEnumValue E.B destructive: drops value B of enum E; stored B values become invalid",
		}},
		{"document becomes abstract", "interface I @concrete { a: Int }", "interface I { a: Int }", []string{
			"ChangeClassKind I. destructive: changes I from class to abstract class, dropping its documents",
		}},
		{"abstract becomes concrete", "interface I { a: Int }", "interface I @concrete { a: Int }", []string{
			"ChangeClassKind I.: changes I from abstract class to class",
		}},
		{"document becomes subdocument", "type A { b: B }\ntype B { x: Int }", "type A { b: B }\ntype B @subdocument { x: Int }", []string{
			"AlterField A.b destructive: changes field A.b from reference to B to subdocument B; its stored values are dropped",
			"ChangeClassKind B. destructive: changes B from class to subdocument, dropping its documents",
		}},
		{"subdocument becomes document", "type B @subdocument { x: Int }", "type B { x: Int }", []string{
			"ChangeClassKind B.: changes B from subdocument to class",
		}},
		{"gains a parent", "interface P { a: Int }\ntype T { b: Int }", "interface P { a: Int }\ntype T implements P { b: Int }", []string{
			"ChangeParents T.: makes T inherit from P",
			"AddField T.a: adds field T.a Int",
		}},
		{"loses a parent", "interface P { a: Int }\ninterface Q implements P\ntype T implements Q { b: Int }",
			"interface P { a: Int }\ninterface Q\ntype T implements Q { b: Int }", []string{
				"ChangeParents Q.: makes Q no longer inherit from P",
				"DropField Q.a: drops field Q.a",
				"ChangeParents T. destructive: makes T no longer inherit from P; references to P may point to T documents",
				"DropField T.a destructive: drops field T.a and its values",
			}},
		{"swaps a parent", "interface P\ninterface Q\ntype T implements P", "interface P\ninterface Q\ntype T implements Q", []string{
			"ChangeParents T. destructive: makes T inherit from Q and makes T no longer inherit from P; references to P may point to T documents",
		}},
		{"redundant parent changes nothing", "interface P\ninterface Q implements P\ntype T implements Q & P", "interface P\ninterface Q implements P\ntype T implements Q", nil},
		{"order: enums, classes, dropped classes, dropped enums",
			"enum Old { A }\nenum Keep { A B }\ntype Gone { x: Int }\ntype Stay { x: Int }",
			"type Stay { x: Int y: New }\nenum New { A }\nenum Keep { A C }\ntype Fresh { x: Int }", []string{
				"AddEnum New.: adds enum New",
				"AddEnumValue Keep.C: adds value C to enum Keep",
				"AddField Stay.y: adds field Stay.y New",
				"AddClass Fresh.: adds class Fresh",
				"DropClass Gone. destructive: drops class Gone and its documents",
				"DropEnum Old. destructive: drops enum Old; stored values of it become invalid",
				"DropEnumValue Keep.B destructive: drops value B of enum Keep; stored B values become invalid",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, c := range Diff(mustParse(t, tt.old), mustParse(t, tt.new)) {
				got = append(got, changeString(c))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestDiffNil(t *testing.T) {
	t.Parallel()
	if got := Diff(nil, nil); len(got) != 0 {
		t.Errorf("Diff(nil, nil) = %v", got)
	}
	s := mustParse(t, "type A { a: Int }")
	if got := Diff(nil, s); len(got) != 1 || got[0].Kind != AddClass {
		t.Errorf("Diff(nil, s) = %v", got)
	}
	if got := Diff(s, nil); len(got) != 1 || got[0].Kind != DropClass || !got[0].Destructive {
		t.Errorf("Diff(s, nil) = %v", got)
	}
}

func TestChangeKindString(t *testing.T) {
	t.Parallel()
	for k := AddEnum; k <= WidenReference; k++ {
		if s := k.String(); strings.HasPrefix(s, "ChangeKind(") {
			t.Errorf("kind %d has no name", int(k))
		}
	}
	if s := ChangeKind(0).String(); s != "ChangeKind(0)" {
		t.Errorf("ChangeKind(0) = %q", s)
	}
}
