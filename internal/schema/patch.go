package schema

import "github.com/sluice-dev/sluice"

// CheckPatch checks the names patch uses, a JSON Merge Patch (RFC 7396) of
// a document of class c without its "@id", "@type" and "@version": each
// member must name a field of c, and so each member of an object it gives
// a single subdocument field, which is merged into the stored subdocument,
// at any depth ("@type" may be given there, naming the field's type).
// This holds whatever a member's value: a member naming no field that
// removes it (null) would otherwise be a commit that changes nothing, a
// typo never reported, while one that sets it is refused when the patched
// document is validated. Values are checked then too; inside a field of
// type JSON any name goes. The errors are ValidateDocument's.
func CheckPatch(s *sluice.Schema, c *sluice.Class, patch map[string]any) error {
	v := &validator{schema: s, root: c.Name}
	return v.patch(c, patch, "")
}

// patch checks the names in m, a merge patch of an object of class c
// whose path is prefix (as object's).
func (v *validator) patch(c *sluice.Class, m map[string]any, prefix string) error {
	if err := v.checkKeys(c, m, prefix); err != nil {
		return err
	}
	for _, f := range c.Fields {
		sub, ok := m[f.Name].(map[string]any)
		if !ok || f.List || f.Type.Kind != sluice.TypeSubdocument {
			continue
		}
		if t := sub["@type"]; t != nil && t != f.Type.Name {
			return v.errorf(prefix+f.Name, `"@type" must be %s, got %s`, quote(f.Type.Name), describe(t))
		}
		if err := v.patch(v.schema.Class(f.Type.Name), sub, prefix+f.Name+"."); err != nil {
			return err
		}
	}
	return nil
}
