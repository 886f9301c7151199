# Sluice — run `make help` for the targets.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
BIN      := bin/sluice

.PHONY: help
help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-20s %s\n", $$1, $$2}'

.PHONY: run
run: build ## build, then run Sluice on port 6363 with its embedded Postgres in ./data
	@# exec: the daemon replaces the shell, so a SIGTERM or SIGINT that make
	@# passes on reaches it (`go run` left its child and Postgres running).
	exec ./$(BIN) serve

.PHONY: build
build: ## build the static binary into bin/sluice
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/sluice

.PHONY: docker
docker: ## build the Docker image sluice:$(VERSION) and sluice:latest (needs a Docker engine)
	docker build --build-arg VERSION=$(VERSION) -t sluice:$(VERSION) -t sluice:latest .

.PHONY: docker-binary
# The binary goes to a directory of its own, removed after: a fixed path
# was overwritten by a concurrent run (another checkout, another user).
docker-binary: ## run the Dockerfile's build command (no Docker engine needed)
	@dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && \
	echo CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags \"$(LDFLAGS)\" -o "$$dir/sluice" ./cmd/sluice && \
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o "$$dir/sluice" ./cmd/sluice && \
	"$$dir/sluice" version

.PHONY: test
test: test-go test-graphql-http test-graphql-sse test-graphql-clients test-introspection test-browser test-webhooks ## run every test (Go with -race, the Node client tests, the browser test, the webhook receiver)

# The tests that start sluice as its own process run the release binary,
# built here once per run rather than by each test binary (see
# daemontest.SluiceBinary).
.PHONY: test-go
test-go: build
	SLUICE_TEST_BINARY=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -timeout 15m ./...

# NPM_CI installs a test directory's pinned npm packages when they are
# missing or older than its package-lock.json (npm writes
# node_modules/.package-lock.json on every install).
NPM_CI = { [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-audit --no-fund --loglevel=error; }

.PHONY: test-graphql-http
test-graphql-http: ## run the graphql-http server audit (Node 20; npm ci in test/graphql-http first)
	cd test/graphql-http && $(NPM_CI)
	SLUICE_GRAPHQL_HTTP_AUDIT=1 $(GO) test -count=1 -run '^TestGraphQLHTTPAudit$$' -v ./graph/

.PHONY: test-graphql-sse
test-graphql-sse: ## run the graphql-sse npm client against a daemon (Node 20; npm ci in test/graphql-sse first)
	cd test/graphql-sse && $(NPM_CI)
	SLUICE_GRAPHQL_SSE_CLIENT=1 $(GO) test -count=1 -run '^TestGraphQLSSEClient$$' -v ./internal/gqltransport/

.PHONY: test-introspection
test-introspection: ## build client schemas from introspection with graphql-js 16 (Node 20; npm ci in test/introspection first)
	cd test/introspection && $(NPM_CI)
	SLUICE_INTROSPECTION_CLIENT=1 $(GO) test -count=1 -run '^TestIntrospectionClient$$' -v ./graph/

.PHONY: test-browser
test-browser: ## drive the console (with axe-core, on two daemons; its Stream view under large commits; what a writer puts in a database, shown as text, and framing refused), GraphiQL, EventSource with stream tickets from another origin (and the docs' example across a restart), conditional and idempotent writes from another origin, cross-site forms, and the files a browser saves of the API's answers, in headless Chromium (Node 20, /usr/bin/chromium; npm ci in test/browser first)
	cd test/browser && $(NPM_CI)
	SLUICE_BROWSER_TEST=1 $(GO) test -count=1 -run '^TestBrowserConsole(Names|StreamBounds|Hostile)?$$' -v ./internal/console/
	SLUICE_BROWSER_TEST=1 $(GO) test -count=1 -run '^TestBrowser$$' -v ./internal/graphiql/
	SLUICE_BROWSER_TEST=1 $(GO) test -count=1 -run '^TestBrowser(EventSource|CrossSiteForms|ConditionalWrites|Downloads)$$' -v ./internal/daemon/
	SLUICE_BROWSER_TEST=1 $(GO) test -count=1 -run '^TestBrowserExample$$' -v ./internal/doctest/

.PHONY: test-webhooks
test-webhooks: build ## deliver webhooks to a receiver that verifies every signature with the standardwebhooks npm package: order across replicas, retries, kill -9, replay, revocation (Node 20; npm ci in test/webhooks first)
	cd test/webhooks && $(NPM_CI)
	SLUICE_WEBHOOK_RECEIVER=1 SLUICE_TEST_BINARY=$(CURDIR)/$(BIN) $(GO) test -race -count=1 -run '^TestWebhook' -v ./internal/webhook/

.PHONY: graphiql-assets
graphiql-assets: ## vendor GraphiQL, React and graphql-sse from npm into internal/graphiql/assets (versions pinned in tools/graphiql)
	cd tools/graphiql && npm ci --no-audit --no-fund --loglevel=error
	node tools/graphiql/vendor.mjs internal/graphiql/assets

.PHONY: console-assets
console-assets: ## vendor Preact and htm from npm into internal/console/assets (versions pinned in tools/console)
	cd tools/console && npm ci --no-audit --no-fund --loglevel=error
	node tools/console/vendor.mjs internal/console/assets

.PHONY: console-screenshots
console-screenshots: ## run the console's browser test and keep a screenshot of each view in docs/console
	cd test/browser && $(NPM_CI)
	SLUICE_BROWSER_TEST=1 SLUICE_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run '^TestBrowserConsole$$' ./internal/console/

.PHONY: test-graphql-clients
test-graphql-clients: ## run graphql-sse (both modes), graphql-ws, Apollo Client, urql and a TypeScript client typed by GraphQL Code Generator against a daemon, the docs' Node examples across a restart, and the edit-safely example racing itself (Node 20; npm ci in test/clients first)
	cd test/clients && $(NPM_CI)
	SLUICE_GRAPHQL_CLIENTS=1 $(GO) test -count=1 -run '^TestGraphQLClients$$' -v ./internal/gqltransport/
	SLUICE_GRAPHQL_CLIENTS=1 $(GO) test -count=1 -run '^(TestClientExamples|TestEditSafelyExample)$$' -v ./internal/doctest/

.PHONY: bench
bench: ## run the benchmarks (see docs/benchmarks.md)
	$(GO) test -run '^$$' -bench 'WriteBatch1000' -benchtime 60x -count 3 ./internal/bench/
	$(GO) test -run '^$$' -bench 'WriteConcurrent8' -benchtime 2400x -count 3 ./internal/bench/
	$(GO) test -run '^$$' -bench 'WriteStatements' -benchtime 4000x -v ./internal/bench/
	$(GO) test -run '^$$' -bench 'WriteLargeDocuments' -benchtime 2x -timeout 30m ./internal/bench/
	$(GO) test -run '^$$' -bench 'ReadDocuments' -benchmem -count 3 ./internal/rest/
	$(GO) test -run '^$$' -bench 'HTTP2' -benchtime 3s -count 3 ./internal/rest/
	$(GO) test -run '^$$' -bench 'CopyRows' -benchmem -count 3 ./internal/postgres/
	$(GO) test -run '^$$' -bench 'Queries' -count 3 ./graph/
	$(GO) test -run '^$$' -bench 'ReadScale' -benchtime 300x -count 3 ./internal/bench/
	$(GO) test -run '^$$' -bench 'Past$$' -benchtime 100x -count 3 -timeout 30m ./internal/bench/
	$(GO) test -run '^$$' -bench 'ReadAsOfWalk' -benchtime 20x ./internal/engine/
	$(GO) test -run '^$$' -bench 'LinksScale' -benchtime 300x -count 3 ./internal/bench/
	$(GO) test -run '^$$' -bench 'Streams' -benchtime 1x -timeout 30m ./internal/bench/
	$(GO) test -run '^$$' -bench 'LiveQueries' -benchtime 1x -timeout 30m ./internal/bench/
	$(GO) test -run '^$$' -bench 'LiveBudget' -benchtime 1x -timeout 30m ./internal/bench/
	$(GO) test -run '^$$' -bench 'Webhooks' -benchtime 1x -count 3 ./internal/bench/

.PHONY: bench-peer
bench-peer: ## run the peer benchmark against PostGraphile 4 (installs wrk and postgraphile@4 if missing; about 9 minutes; see docs/benchmarks.md)
	scripts/peerbench.sh

# staticcheck and deadcode run from the module proxy at pinned versions,
# so that lint needs nothing installed but Go.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
DEADCODE    ?= golang.org/x/tools/cmd/deadcode@v0.52.0

.PHONY: lint
lint: ## gofmt, go vet, staticcheck, and deadcode (no function that neither the binary nor a test reaches)
	@test -z "$$(gofmt -l .)" || (gofmt -l .; echo 'run gofmt -w .'; exit 1)
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@dead="$$($(GO) run $(DEADCODE) -test ./...)"; test -z "$$dead" || (echo "$$dead"; echo 'unreachable code: delete it'; exit 1)

# The Dockerfile is checked without a container engine: BuildKit's parser
# and lint rules, and what the image must hold for operators (a separate
# module, tools/dockerfilecheck, so that Sluice does not depend on
# BuildKit).
.PHONY: lint-docker
lint-docker: ## check the Dockerfile without an engine (BuildKit's lint rules and the image's operating rules)
	cd tools/dockerfilecheck && $(GO) test -count=1 ./... && $(GO) run . ../../Dockerfile

.PHONY: generate
generate: ## write the generated files: docs/configuration.md from internal/config/options.go
	$(GO) run ./internal/config/gendoc docs/configuration.md

.PHONY: verify
verify: lint docker-binary lint-docker ## lint, check go.mod is tidy, the generated files are current, the Docker build command and the Dockerfile
	$(GO) mod tidy -diff
	cd tools/dockerfilecheck && $(GO) mod tidy -diff
	$(GO) run ./internal/config/gendoc -check docs/configuration.md
