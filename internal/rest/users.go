package rest

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/sluice-dev/sluice"
)

func (a *api) listOrganizations(w http.ResponseWriter, r *http.Request) {
	names, err := a.Engine.Organizations(r.Context(), userFrom(r))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, names)
}

func (a *api) createOrganization(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
	}
	if err := decodeSmallJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	if err := a.Engine.CreateOrganization(r.Context(), userFrom(r), body.Name); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, success(map[string]any{"name": body.Name}))
}

func userJSON(u *sluice.User) map[string]any {
	return map[string]any{"name": u.Name, "organization": u.Org, "superuser": u.Superuser}
}

func (a *api) listUsers(w http.ResponseWriter, r *http.Request) {
	us, err := a.Engine.Users(r.Context(), userFrom(r))
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(us))
	for _, u := range us {
		out = append(out, userJSON(u))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) createUser(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name         string `json:"name"`
		Organization string `json:"organization"`
		Password     string `json:"password"`
	}
	if err := decodeSmallJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	// Without one, the engine looked up organization "" and answered 404
	// `organization "" does not exist`, as if the name were wrong rather
	// than missing.
	if body.Organization == "" {
		writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "organization is required: the organization the user belongs to (GET /api/organizations lists them)"))
		return
	}
	u, err := a.Engine.CreateUser(r.Context(), userFrom(r), body.Organization, body.Name, body.Password)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, success(userJSON(u)))
}

func (a *api) setRole(w http.ResponseWriter, r *http.Request) {
	var body struct {
		User string `json:"user"`
		Role string `json:"role"`
	}
	if err := decodeSmallJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	role, ok := sluice.ParseRole(body.Role)
	if !ok && body.Role != "none" {
		writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "role %s: want read, write, admin or none", sluice.Echo(body.Role)))
		return
	}
	org, name := dbPath(r)
	if err := a.Engine.SetRole(r.Context(), userFrom(r), org, name, body.User, role); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, success(map[string]any{"user": body.User, "database": org + "/" + name, "role": role.String()}))
}

// listRoles answers the roles granted on a database: a JSON array of
// {"user","role"}, by user name.
func (a *api) listRoles(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		writeError(w, r, err)
		return
	}
	org, name := dbPath(r)
	gs, err := a.Engine.Roles(r.Context(), userFrom(r), org, name)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(gs))
	for _, g := range gs {
		out = append(out, map[string]any{"user": g.User, "role": g.Role.String()})
	}
	writeJSON(w, http.StatusOK, out)
}

func tokenJSON(t *sluice.Token) map[string]any {
	out := map[string]any{"id": t.ID, "name": t.Name, "created": t.CreatedAt}
	if t.RevokedAt != nil {
		out["revoked"] = *t.RevokedAt
	}
	return out
}

func (a *api) listTokens(w http.ResponseWriter, r *http.Request) {
	ts, err := a.Engine.Tokens(r.Context(), userFrom(r))
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(ts))
	for _, t := range ts {
		out = append(out, tokenJSON(t))
	}
	writeJSON(w, http.StatusOK, out)
}

// createToken answers with the token's secret; it is never shown again.
func (a *api) createToken(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
	}
	if r.ContentLength != 0 {
		if err := decodeSmallJSON(w, r, &body); err != nil && !isEmptyBody(err) {
			writeError(w, r, err)
			return
		}
	}
	t, secret, err := a.Engine.CreateToken(r.Context(), userFrom(r), body.Name)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := tokenJSON(t)
	out["token"] = secret
	writeJSON(w, http.StatusCreated, success(out))
}

func (a *api) revokeToken(w http.ResponseWriter, r *http.Request) {
	if err := a.noBody(w, r, "revoking a token"); err != nil {
		writeError(w, r, err)
		return
	}
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		writeError(w, r, sluice.Errorf(sluice.CodeInvalid, "token id %s is not a number", sluice.Echo(chi.URLParam(r, "id"))))
		return
	}
	if err := a.Engine.RevokeToken(r.Context(), userFrom(r), id); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, success(map[string]any{"revoked": id}))
}

// deleteOrganization deletes an organization with its users and databases.
func (a *api) deleteOrganization(w http.ResponseWriter, r *http.Request) {
	if err := a.noBody(w, r, "deleting an organization"); err != nil {
		writeError(w, r, err)
		return
	}
	name := chi.URLParam(r, "name")
	if err := a.Engine.DeleteOrganization(r.Context(), userFrom(r), name); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, success(map[string]any{"deleted": name}))
}

// deleteUser deletes a user with its tokens and roles.
func (a *api) deleteUser(w http.ResponseWriter, r *http.Request) {
	if err := a.noBody(w, r, "deleting a user"); err != nil {
		writeError(w, r, err)
		return
	}
	name := chi.URLParam(r, "name")
	if err := a.Engine.DeleteUser(r.Context(), userFrom(r), name); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, success(map[string]any{"deleted": name}))
}

// setPassword changes a user's password: the user's own, or any as the
// super user.
func (a *api) setPassword(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Password string `json:"password"`
	}
	if err := decodeSmallJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	name := chi.URLParam(r, "name")
	if err := a.Engine.ChangePassword(r.Context(), userFrom(r), name, body.Password); err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, success(map[string]any{"user": name}))
}
