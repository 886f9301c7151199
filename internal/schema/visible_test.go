package schema

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice"
)

func TestVisibleSDL(t *testing.T) {
	const sdl = `
# ssn is kept for the auditors
type Person {
  name: String
  "the tax number"
  ssn: String @private # only admins
  salary: Int @protected(role: "write")
  home: Address
}

type Address @subdocument {
  street: String
  code: String @private
}
`
	for _, c := range []struct {
		role       sluice.Role
		want, hide []string
	}{
		{sluice.RoleRead, []string{"name", "home", "street"}, []string{"ssn", "salary", "code", "tax number", "auditors", "only admins"}},
		{sluice.RoleWrite, []string{"name", "salary", "street"}, []string{"ssn", "code", "tax number", "auditors"}},
		{sluice.RoleAdmin, []string{"ssn", "salary", "code", "# ssn is kept for the auditors"}, nil},
	} {
		got, err := VisibleSDL(sdl, c.role)
		if err != nil {
			t.Fatalf("%s: %v", c.role, err)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q missing from\n%s", c.role, w, got)
			}
		}
		for _, h := range c.hide {
			if strings.Contains(got, h) {
				t.Errorf("%s: %q shown in\n%s", c.role, h, got)
			}
		}
		// What a reader is shown is itself a schema of the same classes.
		s, err := Parse(got)
		if err != nil {
			t.Fatalf("%s: the visible schema does not parse: %v\n%s", c.role, err, got)
		}
		if s.Class("Person") == nil || s.Class("Address") == nil {
			t.Errorf("%s: classes lost:\n%s", c.role, got)
		}
	}
}

// TestVisibleSDLLeavesOutEmptySubdocuments: a subdocument a role sees no
// field of (Secret), or only fields of such subdocuments (Vault), is left
// out of what the role is shown, with every field of its type, as the
// role's GraphQL schema leaves them out; what is left is a schema.
func TestVisibleSDLLeavesOutEmptySubdocuments(t *testing.T) {
	const sdl = `type Secret @subdocument { pin: String @private }
type Vault @subdocument { secret: Secret secrets: [Secret!] code: Int @protected(role: "write") }
type Person { name: String secret: Secret vault: Vault }`
	for _, c := range []struct {
		role       sluice.Role
		want, hide []string
	}{
		{sluice.RoleRead, []string{"type Person", "name: String"}, []string{"Secret", "secret", "Vault", "vault", "pin", "code"}},
		{sluice.RoleWrite, []string{"type Person", "type Vault", "vault: Vault", "code: Int"}, []string{"Secret", "secret", "pin"}},
	} {
		got, err := VisibleSDL(sdl, c.role)
		if err != nil {
			t.Fatalf("%s: %v", c.role, err)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q missing from\n%s", c.role, w, got)
			}
		}
		for _, h := range c.hide {
			if strings.Contains(got, h) {
				t.Errorf("%s: %q shown in\n%s", c.role, h, got)
			}
		}
		if _, err := Parse(got); err != nil {
			t.Errorf("%s: the visible schema does not parse: %v\n%s", c.role, err, got)
		}
	}
}

// TestVisibleSDLLeavesOutIndexesOfHiddenFields: an @index that names a
// field a role may not read, declared or inherited, is left out of what
// the role is shown, whole; an index of fields it reads is kept.
func TestVisibleSDLLeavesOutIndexesOfHiddenFields(t *testing.T) {
	const sdl = `interface Staff { pay: Int @private }
type Person @index(fields: ["name", "salaryBand"]) @index(fields: ["name"]) { name: String salaryBand: String @protected(role: "write") }
type Clerk implements Staff @index(fields: ["desk", "pay"]) { desk: String }`
	for _, c := range []struct {
		role       sluice.Role
		want, hide []string
	}{
		{sluice.RoleRead, []string{`type Person @index(fields: ["name"])`, "type Clerk implements Staff {"}, []string{"salaryBand", "pay"}},
		{sluice.RoleWrite, []string{`@index(fields: ["name","salaryBand"]) @index(fields: ["name"])`, "type Clerk implements Staff {"}, []string{"pay"}},
	} {
		got, err := VisibleSDL(sdl, c.role)
		if err != nil {
			t.Fatalf("%s: %v", c.role, err)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q missing from\n%s", c.role, w, got)
			}
		}
		for _, h := range c.hide {
			if strings.Contains(got, h) {
				t.Errorf("%s: %q shown in\n%s", c.role, h, got)
			}
		}
		if _, err := Parse(got); err != nil {
			t.Errorf("%s: the visible schema does not parse: %v\n%s", c.role, err, got)
		}
	}
}

// TestDescribeChangesHidesFields: the description of a schema change a
// reader is given (commit messages, the error that ends its stream)
// names no field, subdocument or index hidden from it, before or after
// the change, and counts the changes it leaves out.
func TestDescribeChangesHidesFields(t *testing.T) {
	from, err := Parse(`
type Person @index(fields: ["name"]) {
  name: String
  ssn: String @private
  bonus: Int
  vault: Vault
}
type Vault @subdocument { pin: String @private }
`)
	if err != nil {
		t.Fatal(err)
	}
	to, err := Parse(`
type Person @index(fields: ["name"]) @index(fields: ["salaryBand"]) {
  name: String
  age: Int
  ssn: Int @private
  bonus: Int @private
  salaryBand: String @protected(role: "write")
  vault: Vault
}
type Vault @subdocument { pin: String @private  code: String @private }
`)
	if err != nil {
		t.Fatal(err)
	}
	changes := Diff(from, to)
	secret := []string{"ssn", "bonus", "salaryBand", "Vault", "code"}
	for _, c := range []struct {
		role   sluice.Role
		shown  []string
		hidden []string
		count  string
	}{
		{sluice.RoleRead, []string{"adds field Person.age Int"}, secret, "5 changes not shown: they concern what role read may not see"},
		{sluice.RoleWrite, []string{"adds field Person.age Int", "salaryBand"}, []string{"ssn", "bonus", "Vault", "code"}, "3 changes not shown: they concern what role write may not see"},
		{sluice.RoleAdmin, append([]string{"adds field Person.age Int"}, secret...), nil, ""},
	} {
		got := DescribeChanges(changes, from, to, c.role)
		for _, w := range c.shown {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q missing from %q", c.role, w, got)
			}
		}
		for _, h := range c.hidden {
			if strings.Contains(got, h) {
				t.Errorf("%s: %q named in %q", c.role, h, got)
			}
		}
		if c.count != "" && !strings.HasSuffix(got, c.count) {
			t.Errorf("%s: %q does not end with %q", c.role, got, c.count)
		}
		if c.count == "" && strings.Contains(got, "not shown") {
			t.Errorf("%s: %q", c.role, got)
		}
	}
	if got := DescribeChanges(nil, from, to, sluice.RoleRead); got != "" {
		t.Errorf("no changes: %q", got)
	}
}
