package sluice

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeError(t *testing.T) {
	type body struct {
		Name  string            `json:"name"`
		IDs   []string          `json:"ids"`
		Sizes []int             `json:"sizes"`
		Tags  map[string]string `json:"tags"`
		On    *bool             `json:"on"`
		Sub   struct {
			Ratio float64 `json:"ratio"`
		} `json:"sub"`
	}
	for in, want := range map[string]string{
		`{"name":{}}`:            `field "name": expected a string, got an object`,
		`{"ids":"x"}`:            `field "ids": expected an array of strings, got a string`,
		`{"sizes":[1,"2"]}`:      `field "sizes": expected a whole number, got a string`,
		`{"sizes":{}}`:           `field "sizes": expected an array of whole numbers, got an object`,
		`{"tags":[]}`:            `field "tags": expected an object, got an array`,
		`{"on":"yes"}`:           `field "on": expected true or false, got a string`,
		`{"sub":{"ratio":true}}`: `field "sub.ratio": expected a number, got true or false`,
		`[]`:                     `expected an object, got an array`,
		`{"name":`:               `invalid JSON: it ends before it is complete`,
		`{"name" "x"}`:           `invalid JSON: an unexpected character '"' at byte 9`,
	} {
		var b body
		err := DecodeError(json.Unmarshal([]byte(in), &b))
		if err.Code != CodeInvalid || err.Message != want {
			t.Errorf("%s: %s %q, want %q", in, err.Code, err.Message, want)
		}
		if strings.Contains(err.Message, "Go") || strings.Contains(err.Message, "json:") {
			t.Errorf("%s: decoder text in %q", in, err.Message)
		}
	}
	dec := json.NewDecoder(strings.NewReader(`{"nmae":"x"}`))
	dec.DisallowUnknownFields()
	var b body
	if err := DecodeError(dec.Decode(&b)); err.Message != `unknown field "nmae"` {
		t.Errorf("unknown field: %q", err.Message)
	}
}
