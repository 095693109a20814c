# The steps CI runs (.ci/run calls `make ci`). Each target works on its own.

GO       ?= go
PKGS     := ./...
# The race detector slows code 5-10x; -short trims the heaviest cases.
RACEFLAGS ?= -race -short

.PHONY: all build test race vet fmt-check tidy-check staticcheck bench-smoke fuzz-smoke ci clean

all: build test

build:
	$(GO) build -o bin/yuebing ./cmd/yuebing

# The README's test command.
test:
	$(GO) test $(PKGS)

race:
	$(GO) test $(RACEFLAGS) $(PKGS)

# The CUDA device (build tag cuda) needs cgo, not a GPU: vet it wherever a C
# compiler is present so it keeps building.
vet:
	$(GO) vet $(PKGS)
	@if command -v gcc >/dev/null 2>&1; then echo "$(GO) vet -tags cuda ./adapter/hbmcuda"; CGO_ENABLED=1 $(GO) vet -tags cuda ./adapter/hbmcuda; fi

fmt-check:
	@out=$$(gofmt -s -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt -s would change:"; echo "$$out"; exit 1; fi

tidy-check:
	$(GO) mod tidy -diff

staticcheck:
	$(GO) tool staticcheck $(PKGS)

# One iteration of every benchmark: they compile and run, figures aside.
bench-smoke:
	$(GO) test -run '^$$' -bench . -benchtime 1x $(PKGS)

ci: fmt-check tidy-check vet staticcheck test race bench-smoke

clean:
	rm -rf bin
