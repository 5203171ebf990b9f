package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flightline/flightline/config"
	"github.com/stretchr/testify/require"
)

// The docs are tested: every YAML block of README.md and docs/ loads with
// the config loader, and the documented local commands run (below).

// mdBlock is one fenced code block of a Markdown file.
type mdBlock struct {
	file string // relative to the repository's root
	line int    // of the opening fence
	lang string
	text string
}

func (b mdBlock) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// repoRoot is the repository's root, from cmd/flightline.
const repoRoot = "../.."

// docBlocks returns the fenced blocks of README.md and docs/**/*.md whose
// language is lang. An indented fence (in a list) is read with its
// indentation removed.
func docBlocks(t *testing.T, lang string) []mdBlock {
	t.Helper()
	files := []string{"README.md"}
	require.NoError(t, filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(repoRoot, p)
			files = append(files, rel)
		}
		return err
	}))
	var out []mdBlock
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		require.NoError(t, err)
		lines := strings.Split(string(b), "\n")
		for i := 0; i < len(lines); i++ {
			trimmed := strings.TrimLeft(lines[i], " ")
			if !strings.HasPrefix(trimmed, "```") || trimmed == "```" {
				continue
			}
			indent := len(lines[i]) - len(trimmed)
			blk := mdBlock{file: f, line: i + 1, lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))}
			var body []string
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
				l := lines[i]
				if len(l) >= indent && strings.TrimSpace(l[:indent]) == "" {
					l = l[indent:]
				}
				body = append(body, l)
			}
			blk.text = strings.Join(body, "\n") + "\n"
			if blk.lang == lang {
				out = append(out, blk)
			}
		}
	}
	return out
}

// Every YAML example of the docs loads with the real loader; hosts and
// secrets may be placeholders: each ${VAR} is set. An error names the
// Markdown file and its line.
func TestDocsYAMLExamplesLoad(t *testing.T) {
	blocks := docBlocks(t, "yaml")
	require.GreaterOrEqual(t, len(blocks), 6, "the docs' YAML examples were not found")
	placeholder := func(name string) (string, bool) { return "placeholder-" + strings.ToLower(name), true }
	for _, b := range blocks {
		// Blank lines before the block make the loader's line numbers
		// the Markdown file's.
		_, err := config.Parse(b.file, []byte(strings.Repeat("\n", b.line)+b.text), placeholder)
		require.NoError(t, err, "the YAML example at %s does not load", b)
	}
}

// An unquoted ${VAR} in a {…} mapping, the mistake the docs once made,
// gets an error that says how to fix it.
func TestConfigYAMLErrorHintsQuoting(t *testing.T) {
	_, err := config.Parse("f.yml", []byte("sinks:\n  w:\n    postgres: {dsn: postgres://db/x, table: t, password: ${PW}}\n"), envOf(nil))
	require.ErrorContains(t, err, "f.yml: not valid YAML")
	require.ErrorContains(t, err, "line 3 has an unquoted ${…} in a {…} mapping: quote values that contain ${…} in a {…} mapping")
}

// shellWords splits a command line as sh would for the docs' commands:
// words separated by blanks, '…' and "…" quoting, a trailing # comment.
func shellWords(t *testing.T, line string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(line[i+1:], c)
			require.GreaterOrEqual(t, j, 0, "unbalanced quote in %q", line)
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			i = len(line)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// docCommands returns the flightline commands of a shell block: its lines
// joined at trailing backslashes, the binary's path and comments dropped.
func docCommands(t *testing.T, b mdBlock) [][]string {
	var out [][]string
	joined := strings.ReplaceAll(b.text, "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		w := shellWords(t, line)
		if len(w) == 0 {
			continue
		}
		if filepath.Base(w[0]) != "flightline" {
			continue
		}
		out = append(out, w[1:])
	}
	return out
}

// findBlock returns the block of README.md of language lang that contains
// want.
func findBlock(t *testing.T, lang, want string) mdBlock {
	t.Helper()
	for _, b := range docBlocks(t, lang) {
		if b.file == "README.md" && strings.Contains(b.text, want) {
			return b
		}
	}
	t.Fatalf("README.md has no %s block containing %q", lang, want)
	return mdBlock{}
}

// The README's first run, as written: its flightline.yml, then check,
// sync --once and sync --once again, in an empty directory.
func TestDocsFirstRun(t *testing.T) {
	yml := findBlock(t, "yaml", "generator: {rows:")
	cmds := docCommands(t, findBlock(t, "sh", "sync --once"))
	require.Len(t, cmds, 3, "check, sync --once, sync --once")
	t.Chdir(t.TempDir())
	require.NoError(t, os.WriteFile("flightline.yml", []byte(yml.text), 0o600))
	logs := captureLogs(t)
	for i, args := range cmds {
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := runCommand(ctx, args[0], args[1:], &out)
		cancel()
		require.NoError(t, err, "%s: flightline %s\n%s\n%s", yml, strings.Join(args, " "), out.String(), logs.String())
		if i == 0 {
			require.Contains(t, out.String(), "sync --once reads to row 100000")
		}
	}
	require.Equal(t, 2, strings.Count(logs.String(), `msg="pipeline sync complete" pipeline=to_delta rows=100000 `)+
		strings.Count(logs.String(), `msg="pipeline sync complete" pipeline=to_delta rows=0 `), logs.String())
	require.Contains(t, logs.String(), `msg="pipeline sync complete" pipeline=to_files rows=100000 `)
	require.Contains(t, logs.String(), `msg="pipeline sync complete" pipeline=to_files rows=0 `)
	_, err := os.Stat("flightline-demo/orders-delta/_delta_log/00000000000000000000.json")
	require.NoError(t, err)
}

// The README's serve-source, serve-sink and run, as written, with a
// bounded generator in place of the unbounded one, local paths in place
// of /var/lib and /etc, and free ports.
func TestDocsServeAndRun(t *testing.T) {
	cmds := docCommands(t, findBlock(t, "sh", "flightline serve-source"))
	require.Len(t, cmds, 3, "serve-source, serve-sink, run")
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(token, []byte("a-token\n"), 0o600))
	src, sink := freeAddr(t), freeAddr(t)
	subst := strings.NewReplacer("rows=0&", "rows=25000&", "/var/lib/flightline", filepath.Join(dir, "data"),
		"/etc/flightline/token", token, "127.0.0.1:7401", src, "127.0.0.1:7402", sink)
	for _, args := range cmds {
		for i := range args {
			args[i] = subst.Replace(args[i])
		}
	}
	logs := captureLogs(t)
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 2)
	for _, args := range cmds[:2] {
		go func() { served <- runCommand(ctx, args[0], args[1:], &bytes.Buffer{}) }()
	}
	require.Eventually(t, func() bool { return strings.Count(logs.String(), "msg=listening") == 2 }, time.Minute, 10*time.Millisecond, logs.String())
	rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, runCommand(rctx, cmds[2][0], cmds[2][1:], &bytes.Buffer{}), logs.String())
	require.Regexp(t, regexp.MustCompile(`msg="run finished" pipeline=orders-to-files rows=25000 `), logs.String())
	stop()
	require.NoError(t, <-served)
	require.NoError(t, <-served)
}

// The README's Go snippets are cut from the Example functions they name:
// each statement's expression (the right of := or =, comments dropped)
// appears in the example file, so a snippet cannot drift from code that
// compiles and runs.
func TestReadmeGoSnippets(t *testing.T) {
	var blocks []mdBlock
	for _, b := range docBlocks(t, "go") {
		if b.file == "README.md" {
			blocks = append(blocks, b)
		}
	}
	require.Len(t, blocks, 3)
	files := []string{"coordinator/example_test.go", "flightsink/example_test.go", "pipelines/example_test.go"}
	space := regexp.MustCompile(`\s+`)
	norm := func(s string) string { return space.ReplaceAllString(strings.TrimSpace(s), " ") }
	for i, b := range blocks {
		src, err := os.ReadFile(filepath.Join(repoRoot, files[i]))
		require.NoError(t, err)
		have := norm(string(src))
		// Join a call continued over lines, as gofmt writes it.
		text := regexp.MustCompile(`([,(])\s*\n\s*`).ReplaceAllString(b.text, "$1 ")
		for _, line := range strings.Split(text, "\n") {
			code, _, _ := strings.Cut(line, "//")
			code = strings.TrimSpace(code)
			if code == "" || code == "}" || code == "})" {
				continue
			}
			if _, rhs, ok := strings.Cut(code, ":="); ok {
				code = rhs
			} else if _, rhs, ok := strings.Cut(code, " = "); ok {
				code = rhs
			}
			code = strings.TrimSuffix(strings.TrimSpace(code), ",")
			require.Contains(t, have, norm(code), "%s: %q is not in %s", b, code, files[i])
		}
	}
}

// The Python snippets of docs/protocol.md run as written against a served
// sink and source (pyarrow from FLIGHTLINE_PYTHON, the services' venv):
// the push twice (the second resumes), the push against a sink whose token
// it lacks (a pyarrow.flight error, not an AttributeError), the read of an
// unbounded stream (it ends), and the identity transform under a run.
func TestDocsPythonSnippets(t *testing.T) {
	py := os.Getenv("FLIGHTLINE_PYTHON")
	if py == "" {
		if os.Getenv("FLIGHTLINE_REQUIRE_SERVICES") == "1" {
			t.Fatal("FLIGHTLINE_PYTHON (a Python with pyarrow) is not set")
		}
		t.Skip("FLIGHTLINE_PYTHON (a Python with pyarrow) is not set; integration/services/services.sh up python sets it")
	}
	var snippets []mdBlock
	for _, b := range docBlocks(t, "python") {
		if b.file == "docs/protocol.md" {
			snippets = append(snippets, b)
		}
	}
	require.Len(t, snippets, 3, "push, read, transform")
	push, read, ident := snippets[0].text, snippets[1].text, snippets[2].text
	require.Contains(t, push, "grpc://127.0.0.1:7402")
	require.Contains(t, read, "grpc://127.0.0.1:7401")
	require.Contains(t, ident, "grpc://0.0.0.0:7403")

	logs := captureLogs(t)
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("s3cr3t"), 0o600))
	sink, locked, src := freeAddr(t), freeAddr(t), freeAddr(t)
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 3)
	go func() { served <- serveSink(ctx, []string{"--sink", "memory:", "--listen", sink}) }()
	go func() {
		served <- serveSink(ctx, []string{"--sink", "memory:", "--listen", locked, "--token-file", token})
	}()
	go func() {
		served <- serveSource(ctx, []string{"--source", "generator:?rows=0&batch_rows=10000", "--listen", src})
	}()
	defer func() {
		stop()
		for range 3 {
			require.NoError(t, <-served)
		}
	}()
	require.Eventually(t, func() bool { return strings.Count(logs.String(), "msg=listening") == 3 }, time.Minute, 10*time.Millisecond)

	python := func(code string) (string, error) {
		pctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(pctx, py, "-c", code)
		out, err := cmd.CombinedOutput()
		require.NoError(t, pctx.Err(), "the snippet did not end:\n%s", out)
		return string(out), err
	}
	for i := range 2 {
		out, err := python(strings.ReplaceAll(push, "127.0.0.1:7402", sink) + "\nprint('start', start)\n")
		require.NoError(t, err, out)
		require.Contains(t, out, fmt.Sprintf("start %d", 300*i))
	}
	out, err := python(strings.ReplaceAll(push, "127.0.0.1:7402", locked))
	require.Error(t, err)
	require.Contains(t, out, "pyarrow._flight.FlightUnauthenticatedError", out)
	require.NotContains(t, out, "AttributeError")

	out, err = python(strings.ReplaceAll(read, "127.0.0.1:7401", src))
	require.NoError(t, err, out)
	require.Contains(t, out, `10000 b'{"positions":{"orders/0":15000}}'`)
	require.Contains(t, out, `10000 b'{"positions":{"orders/0":55000}}'`)

	addr := freeAddr(t)
	tctx, stopTransform := context.WithCancel(context.Background())
	defer stopTransform()
	cmd := exec.CommandContext(tctx, py, "-c", strings.ReplaceAll(ident, "0.0.0.0:7403", addr))
	require.NoError(t, cmd.Start())
	defer func() { stopTransform(); _ = cmd.Wait() }()
	rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.Eventually(t, func() bool { return probeListening(addr) }, 30*time.Second, 50*time.Millisecond)
	require.NoError(t, runPipeline(rctx, []string{"--source", "generator:?rows=3000&batch_rows=1000", "--sink", "memory:",
		"--pipeline", "py-transform", "--transform", "grpc://" + addr}), logs.String())
	require.Contains(t, logs.String(), `msg="run finished" pipeline=py-transform rows=3000 `)
}

func probeListening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}
