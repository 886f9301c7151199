"""Builds a client schema from the introspection of Sluice GraphQL endpoints
with graphql-core 3.2 (what Python's gql does) and validates it; exits 1 on
a failure. graphql.TestIntrospectionClient runs it when graphql-core is
installed.

    python3 introspect.py <Authorization header value> <graphql url>...
"""
import json
import sys
import urllib.request

from graphql import build_client_schema, get_introspection_query, validate_schema


def main(authorization, urls):
    query = get_introspection_query(descriptions=True, specified_by_url=True, directive_is_repeatable=True,
                                    schema_description=True, input_value_deprecation=True)
    failed = False
    for url in urls:
        req = urllib.request.Request(url, data=json.dumps({"query": query}).encode(), headers={
            "Authorization": authorization, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req) as res:
                body = json.load(res)
            if "errors" in body:
                raise ValueError(json.dumps(body["errors"]))
            schema = build_client_schema(body["data"])
            errors = validate_schema(schema)
            if errors:
                raise ValueError("; ".join(e.message for e in errors))
            print(f"ok   {url}: build_client_schema and validate_schema ({len(schema.type_map)} types)")
        except Exception as e:  # every failure is reported the same way
            failed = True
            print(f"FAIL {url}: {type(e).__name__}: {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
