// Package skills reads the skills a host ships (Agent Skills: directories
// that each hold a SKILL.md and its files) as MCP's skills extension
// (SEP-2640, io.modelcontextprotocol/skills) serves them: every file a
// resource under skill://<skill-path>/<file-path> with its sha256 digest
// and size, and each skill's entry, its SKILL.md front matter as JSON. It
// also writes the skill that teaches a model a server's rules (Rules).
// It checks everything when a folder is read, so that a host learns of a
// bad skill when it builds, not when a client reads it.
package skills

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"mime"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Extension is the id of MCP's skills extension, which a server declares
// in its capabilities' extensions.
const Extension = "io.modelcontextprotocol/skills"

// Limits of one skill, the extension's: what every conforming host
// accepts. A skill past either one is a problem of its folder.
const (
	MaxFiles = 512      // files of a skill, SKILL.md and nested skills' included
	MaxBytes = 16 << 20 // bytes of all the files of a skill
)

// maxDescription is the longest description the Agent Skills
// specification allows.
const maxDescription = 1024

// Manifest is the file every skill holds at its root.
const Manifest = "SKILL.md"

// scheme is the extension's scheme for skills' resources.
const scheme = "skill://"

// nameRule is the Agent Skills specification's rule for a skill's name:
// 1 to 64 lowercase letters, digits and hyphens, no hyphen first, last,
// or twice in a row.
var nameRule = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$`)

// segmentRule is what a directory above a skill may be named: URI path
// characters that need no escaping, so that the first one is a valid
// authority (RFC 3986 reg-name) and the URI reads as the folder does.
var segmentRule = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)

// Skill is one skill as the extension serves it.
type Skill struct {
	// Path is the skill's directory in its folder ("git-workflow",
	// "acme/billing/refunds"); its last segment is Name.
	Path        string
	Name        string
	Description string
	// Frontmatter is SKILL.md's front matter as a JSON object, every
	// member as written, in order.
	Frontmatter json.RawMessage
	// Files are the skill's files, SKILL.md first, then by path; a nested
	// skill's files are its enclosing skill's too.
	Files []*File
}

// File is one file of a skill, a resource.
type File struct {
	URI  string
	Path string // in the skill's directory
	MIME string
	Data []byte
	// Digest is "sha256:" and the hex of the sha256 of Data.
	Digest string
}

// URI is the URI of the skill's SKILL.md, which names the skill.
func (s *Skill) URI() string { return s.Files[0].URI }

// Text reports whether the file's content is text, which a read returns
// as text rather than base64.
func (f *File) Text() bool { return utf8.Valid(f.Data) }

// Entry is a skill's entry in skills/list and skills/get.
type Entry struct {
	URI         string          `json:"uri"`
	Frontmatter json.RawMessage `json:"frontmatter"`
	Resources   []Resource      `json:"resources"`
}

// Resource is one file of an [Entry].
type Resource struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"`
	Size   int    `json:"size"`
}

// Entry is the skill's entry.
func (s *Skill) Entry() Entry {
	e := Entry{URI: s.URI(), Frontmatter: s.Frontmatter, Resources: make([]Resource, len(s.Files))}
	for i, f := range s.Files {
		e.Resources[i] = Resource{URI: f.URI, Digest: f.Digest, Size: len(f.Data)}
	}
	return e
}

// Error is a problem of one file of a skills folder.
type Error struct {
	File string // its path in the folder
	Err  error
}

// Error names the file before the problem.
func (e *Error) Error() string { return e.File + ": " + e.Err.Error() }

// Unwrap returns the problem.
func (e *Error) Unwrap() error { return e.Err }

// Load reads every skill of fsys: each directory that holds a SKILL.md is
// one, named by its SKILL.md's front matter (name and description, as
// the Agent Skills specification requires), which must be its directory's
// name. Every file belongs to a skill. It returns the skills by path, or
// every problem found, each an [*Error] naming the file.
func Load(fsys fs.FS) ([]*Skill, []error) {
	var errs []error
	fail := func(file string, format string, args ...any) {
		errs = append(errs, &Error{File: file, Err: fmt.Errorf(format, args...)})
	}
	var files []string
	dirs := map[string]bool{} // the directories that hold a SKILL.md
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			fail(p, "cannot be read: %v", err)
		case d.IsDir():
		case !d.Type().IsRegular():
			fail(p, "is not a regular file (a link or a device): a skill's files are served as they are")
		default:
			files = append(files, p)
			if path.Base(p) == Manifest {
				dirs[path.Dir(p)] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, []error{&Error{File: ".", Err: err}}
	}
	if dirs["."] {
		fail(Manifest, "is at the root of the skills folder: put each skill in a directory named for it")
		delete(dirs, ".")
	}
	byDir := map[string][]string{}
	for _, f := range files {
		owners := 0
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			if dirs[d] {
				byDir[d] = append(byDir[d], strings.TrimPrefix(f, d+"/"))
				owners++
			}
		}
		if owners == 0 && f != Manifest {
			fail(f, "belongs to no skill: no directory that holds it has a %s", Manifest)
		}
	}
	var out []*Skill
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		s, problems := read(fsys, dir, byDir[dir])
		errs = append(errs, problems...)
		if s != nil {
			out = append(out, s)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// read reads the skill of directory dir of fsys, whose files are names.
func read(fsys fs.FS, dir string, names []string) (*Skill, []error) {
	var errs []error
	data := make(map[string][]byte, len(names))
	total := 0
	slices.Sort(names)
	if len(names) > MaxFiles {
		errs = append(errs, &Error{File: dir + "/" + Manifest, Err: fmt.Errorf("its skill has %d files: a skill may have %d at most", len(names), MaxFiles)})
	}
	for _, n := range names {
		b, err := fs.ReadFile(fsys, dir+"/"+n)
		if err != nil {
			errs = append(errs, &Error{File: dir + "/" + n, Err: fmt.Errorf("cannot be read: %v", err)})
			continue
		}
		total += len(b)
		if total > MaxBytes {
			errs = append(errs, &Error{File: dir + "/" + n, Err: fmt.Errorf("brings its skill's files to %d bytes or more: a skill's files may hold %d bytes at most", total, MaxBytes)})
			return nil, errs
		}
		data[n] = b
	}
	if len(errs) > 0 {
		return nil, errs
	}
	s, err := New(dir, data)
	if err != nil {
		var fe *Error
		if errors.As(err, &fe) {
			fe.File = dir + "/" + fe.File
			return nil, []error{fe}
		}
		return nil, []error{&Error{File: dir + "/" + Manifest, Err: err}}
	}
	return s, nil
}

// New makes the skill at path dir (its segments separated by "/") of
// files, by their paths in the skill's directory; files must hold a
// SKILL.md whose front matter names the skill after dir's last segment.
// An error names the file in the skill's directory.
func New(dir string, files map[string][]byte) (*Skill, error) {
	manifest, ok := files[Manifest]
	if !ok {
		return nil, &Error{File: Manifest, Err: errors.New("is missing")}
	}
	front, name, desc, err := frontmatter(manifest)
	if err != nil {
		return nil, &Error{File: Manifest, Err: err}
	}
	segments := strings.Split(dir, "/")
	last := segments[len(segments)-1]
	switch {
	case !nameRule.MatchString(name) || strings.Contains(name, "--"):
		return nil, &Error{File: Manifest, Err: fmt.Errorf("the skill's name %q breaks the Agent Skills naming rules: 1 to 64 lowercase letters, digits and hyphens, no hyphen first, last or twice in a row", name)}
	case name != last:
		return nil, &Error{File: Manifest, Err: fmt.Errorf("the skill's name %q is not its directory's name %q: a skill's directory is named for it", name, last)}
	}
	for _, seg := range segments[:len(segments)-1] {
		if !segmentRule.MatchString(seg) {
			return nil, &Error{File: Manifest, Err: fmt.Errorf("the directory %q above the skill has a name a skill:// URI cannot carry as it is: use letters, digits, '.', '_', '~' and '-'", seg)}
		}
	}
	s := &Skill{Path: dir, Name: name, Description: desc, Frontmatter: front}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		f := newFile(dir, p, files[p])
		if p == Manifest {
			s.Files = slices.Insert(s.Files, 0, f)
			continue
		}
		s.Files = append(s.Files, f)
	}
	return s, nil
}

// newFile is the file at path p of the skill at dir.
func newFile(dir, p string, data []byte) *File {
	sum := sha256.Sum256(data)
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	return &File{URI: scheme + dir + "/" + strings.Join(segs, "/"), Path: p, MIME: mimeType(p, data), Data: data,
		Digest: "sha256:" + hex.EncodeToString(sum[:])}
}

// mimeType is a file's type by its extension: markdown, a type the
// system knows, else text or bytes by what it holds.
func mimeType(p string, data []byte) string {
	ext := strings.ToLower(path.Ext(p))
	if ext == ".md" || ext == ".markdown" {
		return "text/markdown"
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	if utf8.Valid(data) {
		return "text/plain"
	}
	return "application/octet-stream"
}

// frontmatter reads a SKILL.md's front matter, a YAML mapping between
// "---" lines at its start, as JSON, with its name and description.
func frontmatter(md []byte) (json.RawMessage, string, string, error) {
	md = bytes.TrimPrefix(md, []byte("\uFEFF"))
	text := strings.ReplaceAll(string(md), "\r\n", "\n")
	rest, ok := strings.CutPrefix(text, "---\n")
	if !ok {
		return nil, "", "", errors.New("does not begin with front matter: a line \"---\", the YAML of name and description, and a line \"---\"")
	}
	body, found := "", false
	lines := strings.SplitAfter(rest, "\n")
	for i, line := range lines {
		if strings.TrimRight(line, " \t\n") == "---" && strings.HasPrefix(line, "---") {
			body, found = strings.Join(lines[:i], ""), true
			break
		}
	}
	if !found {
		return nil, "", "", errors.New("has front matter that never ends: close it with a line \"---\"")
	}
	var doc, more yaml.Node
	dec := yaml.NewDecoder(strings.NewReader(body))
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return nil, "", "", fmt.Errorf("has front matter that is not YAML: %v", err)
	}
	if err := dec.Decode(&more); err != io.EOF {
		return nil, "", "", errors.New("has front matter of more than one YAML document: a line \"---\" ends it")
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, "", "", errors.New("has front matter that is not a mapping of fields (name: ..., description: ...)")
	}
	var b bytes.Buffer
	if err := writeJSON(&b, doc.Content[0]); err != nil {
		return nil, "", "", fmt.Errorf("has front matter JSON cannot carry: %v", err)
	}
	var fields struct {
		Name        any `json:"name"`
		Description any `json:"description"`
	}
	_ = json.Unmarshal(b.Bytes(), &fields)
	name, _ := fields.Name.(string)
	desc, _ := fields.Description.(string)
	switch {
	case name == "":
		return nil, "", "", errors.New("has no name in its front matter: the Agent Skills specification requires name, a string")
	case desc == "" || strings.TrimSpace(desc) == "":
		return nil, "", "", errors.New("has no description in its front matter: the Agent Skills specification requires description, a string that says what the skill does and when to use it")
	case utf8.RuneCountInString(desc) > maxDescription:
		return nil, "", "", fmt.Errorf("has a description of %d characters: the Agent Skills specification allows %d", utf8.RuneCountInString(desc), maxDescription)
	}
	return json.RawMessage(b.Bytes()), name, desc, nil
}

// writeJSON writes a YAML node as JSON, a mapping's keys in order. Scalars
// keep the core schema's types, as YAML parsers of other languages read
// them; a timestamp stays the string it is written as.
func writeJSON(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.AliasNode:
		return writeJSON(b, n.Alias)
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				return fmt.Errorf("line %d: a key must be a plain string", k.Line)
			}
			if i > 0 {
				b.WriteByte(',')
			}
			key, _ := json.Marshal(k.Value)
			b.Write(key)
			b.WriteByte(':')
			if err := writeJSON(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, c); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		var v any
		switch n.ShortTag() {
		case "!!null":
			v = nil
		case "!!bool", "!!int", "!!float":
			if err := n.Decode(&v); err != nil {
				return err
			}
			if f, ok := v.(float64); ok && (f != f || f > 1e308 || f < -1e308) {
				return fmt.Errorf("line %d: %s is not a number JSON has", n.Line, n.Value)
			}
		default:
			v = n.Value
		}
		out, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.Write(out)
	default:
		return fmt.Errorf("line %d: an empty document", n.Line)
	}
	return nil
}
