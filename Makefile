# MateMemory. `make run` starts the all-in-one service; `make test` runs the tests.
GO        ?= go
PKGS      ?= ./...
BIN       ?= bin
TESTFLAGS ?= -count=1 -timeout 20m

export CGO_ENABLED ?= 0

.PHONY: run test test-race bench build lint fmt migrate tidy clean screenshots

run: ## all-in-one: API + workers, embedded NATS and SQLite under $(MATE_DATA_DIR) (default ./data)
	$(GO) run -buildvcs=true ./cmd/api -target=all

test: ## unit and integration tests (SQLite always; MariaDB when MATE_TEST_MYSQL_DSN is set)
	$(GO) test $(TESTFLAGS) $(PKGS)

test-race:
	CGO_ENABLED=1 $(GO) test -race $(TESTFLAGS) $(PKGS)

# VERSION is stamped into every binary (--version, the start-up banner).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  = -X github.com/matememory/matememory/pkg/internal/app.Version=$(VERSION)

BENCHTIME ?= 1x

bench: ## benchmarks (each reports its own p50/p99 and rates); figures go to docs/benchmarks.md
	$(GO) test -run '^$$' -bench . -benchmem -benchtime=$(BENCHTIME) -count=1 -timeout 30m $(PKGS) | tee bench.out

screenshots: ## regenerate the console screenshots in docs/console with the browser test (needs chromium; fonts-wqy-microhei for Chinese)
	mkdir -p docs/console
	MATE_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run TestConsoleInBrowser ./pkg/internal/console

build:
	mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1)
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

migrate: ## apply schema migrations to the configured database and list them
	$(GO) run ./cmd/api migrate

clean:
	rm -rf $(BIN) bench.out
