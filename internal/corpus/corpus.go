// Package corpus holds the schema corpus: Go types that exercise every part
// of schema derivation, as tool inputs. The root package's tests keep their
// schemas as golden files and prove the runtime accepts exactly what those
// schemas allow; the llm package's tests check every provider's rules on
// their exports.
package corpus

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/invopop/jsonschema"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/shape/testdata/othertypes"
)

// Type is one type of the corpus.
type Type struct {
	Name   string                 // golden file testdata/schemas/<name>.json of the root package
	Schema func() json.RawMessage // carmy.SchemaFor[T]
	// Tool declares a tool taking the type as input; nil when the type's
	// root is not an object and so cannot be an input.
	Tool func(name string) *carmy.ToolDef
	// Output declares a tool without input whose output is of the type:
	// each call returns what next gives, which must hold a value of it.
	Output func(name string, next func() any) *carmy.ToolDef
	// Go is the Go type.
	Go reflect.Type
}

func entry[T any](name string) Type {
	c := Type{Name: name, Schema: carmy.SchemaFor[T], Go: reflect.TypeFor[T]()}
	c.Output = func(tool string, next func() any) *carmy.ToolDef {
		return carmy.Tool(func(context.Context) (T, error) { return next().(T), nil }, carmy.Read,
			carmy.Register(false), carmy.Name(tool))
	}
	if reflect.TypeFor[T]().Kind() == reflect.Struct {
		c.Tool = func(tool string) *carmy.ToolDef {
			return carmy.Tool(func(context.Context, T) error { return nil }, carmy.Write,
				carmy.Register(false), carmy.Name(tool))
		}
	}
	return c
}

// Types is the corpus, one entry per golden file.
var Types = []Type{
	entry[Scalars]("scalars"),
	entry[SizedNumbers]("sized_numbers"),
	entry[Order]("nested"),
	entry[Pointers]("pointers"),
	entry[Slices]("slices"),
	entry[Maps]("maps"),
	entry[TimeAndUUID]("time_uuid"),
	entry[Enums]("enums"),
	entry[Tree]("recursive"),
	entry[Expr]("mutual_recursion"),
	entry[Page[Item]]("generic_page_item"),
	entry[Page[string]]("generic_page_string"),
	entry[Tagged[int]]("generic_tagged_int"),
	entry[Embedded]("embedded"),
	entry[Optional]("omitempty_omitzero"),
	entry[Hidden]("json_dash"),
	entry[Forest]("same_name"),
	entry[NumberRules]("rules_numbers"),
	entry[StringRules]("rules_strings"),
	entry[SliceRules]("rules_slices"),
	entry[MapRules]("rules_maps"),
	entry[NestedRules]("rules_nested"),
	entry[OneOfRules]("rules_oneof"),
	entry[FormatRules]("rules_formats"),
	entry[Bytes]("bytes"),
	entry[Described]("descriptions"),
	entry[Commented]("doc_comments"),
	entry[SchemaTags]("schema_tags"),
	entry[FreeForm]("free_form"),
	entry[Empty]("empty"),
	entry[Keys]("keys"),
	entry[Deep]("deep"),
	entry[Grid]("arrays"),
	entry[Inline]("inline_members"),
	entry[ByteArrays]("byte_arrays"),
	entry[Durations]("durations"),
	entry[Containers]("containers"),
	entry[Opaque]("opaque"),
	entry[RequiredValues]("required_values"),
	entry[OmitemptyRules]("omitempty_rules"),
	entry[OmitemptyPointers]("omitempty_pointers"),
	// Roots that are not objects: outputs only.
	entry[Status]("root_enum"),
	entry[[]Item]("root_slice"),
	entry[map[string]Page[Item]]("root_map"),
	entry[*Order]("root_pointer"),
	entry[Tree2[string]]("root_generic_recursive"),
}

// Scalars has one field of each basic kind.
type Scalars struct {
	Flag  bool    `json:"flag"`
	Text  string  `json:"text"`
	Count int     `json:"count"`
	Ratio float64 `json:"ratio"`
}

// SizedNumbers carries the range of every sized number type.
type SizedNumbers struct {
	I8   int8    `json:"i8"`
	I16  int16   `json:"i16"`
	I32  int32   `json:"i32"`
	I64  int64   `json:"i64"`
	I    int     `json:"i"`
	U8   uint8   `json:"u8"`
	U16  uint16  `json:"u16"`
	U32  uint32  `json:"u32"`
	U64  uint64  `json:"u64"`
	U    uint    `json:"u"`
	F32  float32 `json:"f32"`
	F64  float64 `json:"f64"`
	PU16 *uint16 `json:"pu16"`
}

// Order nests structs two levels deep.
type Order struct {
	ID       uint64   `json:"id"`
	Customer Customer `json:"customer"`
	Lines    []Line   `json:"lines"`
}

type Customer struct {
	Name    string  `json:"name" validate:"required"`
	Address Address `json:"address"`
}

type Address struct {
	Street string `json:"street" validate:"required,max=40"`
	City   string `json:"city"`
	Zip    string `json:"zip" validate:"len=5"`
}

type Line struct {
	SKU      string `json:"sku" validate:"required"`
	Quantity uint32 `json:"quantity" validate:"min=1,max=100"`
}

// Pointers are optional and nullable.
type Pointers struct {
	Name     *string            `json:"name"`
	Age      *int8              `json:"age"`
	Address  *Address           `json:"address"`
	Tags     *[]string          `json:"tags"`
	Scores   *map[string]int    `json:"scores"`
	Deep     **bool             `json:"deep"`
	Required *string            `json:"required" validate:"required"`
	Quantity *uint8             `json:"quantity" validate:"required"` // non-null; 0 is fine
	Items    []*Line            `json:"items"`
	ByKey    map[string]*uint16 `json:"by_key"`
}

// Slices of scalars, structs and slices.
type Slices struct {
	Names  []string    `json:"names"`
	Matrix [][]int16   `json:"matrix"`
	Lines  []Line      `json:"lines"`
	Times  []time.Time `json:"times"`
	Flags  []bool      `json:"flags"`
}

// Maps of scalars, structs, slices and maps.
type Maps struct {
	Counts  map[string]int               `json:"counts"`
	Lines   map[string]Line              `json:"lines"`
	Lists   map[string][]string          `json:"lists"`
	Nested  map[string]map[string]uint8  `json:"nested"`
	ByLabel map[Label]float32            `json:"by_label"`
	Sets    map[string]map[string]Status `json:"sets"`
}

// Label is a named string used as a map key.
type Label string

// TimeAndUUID has the types with formats.
type TimeAndUUID struct {
	At      time.Time   `json:"at"`
	Maybe   *time.Time  `json:"maybe"`
	ID      uuid.UUID   `json:"id"`
	Related []uuid.UUID `json:"related"`
	Owner   *uuid.UUID  `json:"owner"`
}

// Status is an enum declared with JSONSchemaExtend.
type Status string

func (Status) JSONSchemaExtend(s *jsonschema.Schema) {
	s.Enum = []any{"open", "closed", "on hold"}
	s.Description = "Status of an order."
}

// Priority is an integer enum declared with JSONSchemaExtend.
type Priority int

func (Priority) JSONSchemaExtend(s *jsonschema.Schema) {
	s.Enum = []any{1, 2, 3}
}

// Enums uses enum types everywhere.
type Enums struct {
	Status    Status            `json:"status"`
	Maybe     *Status           `json:"maybe"`
	List      []Status          `json:"list"`
	ByName    map[string]Status `json:"by_name"`
	Priority  Priority          `json:"priority"`
	MaybePrio *Priority         `json:"maybe_prio"`
	// An omitempty enum whose zero value is not allowed stays required.
	Later Status     `json:"later,omitempty"`
	Prios []Priority `json:"prios,omitempty"`
}

// Tree recurses through a slice and a pointer.
type Tree struct {
	Name     string `json:"name" validate:"required"`
	Children []Tree `json:"children"`
	Parent   *Tree  `json:"parent"`
}

// Expr and Binding recurse through each other.
type Expr struct {
	Op   string   `json:"op" validate:"oneof=add mul let"`
	Args []Expr   `json:"args,omitempty"`
	Let  *Binding `json:"let,omitempty"`
}

type Binding struct {
	Name  string `json:"name" validate:"min=1,max=8"`
	Value Expr   `json:"value"`
}

// Page is a generic type, instantiated twice.
type Page[T any] struct {
	Items []T    `json:"items" validate:"max=3"`
	Next  string `json:"next,omitempty"`
	Total uint16 `json:"total"`
}

type Item struct {
	Name  string  `json:"name" validate:"required"`
	Price float64 `json:"price" validate:"gte=0"`
}

// Tagged is generic over a number type.
type Tagged[T int | float64] struct {
	Value T      `json:"value" validate:"min=-5,max=5"`
	Tag   string `json:"tag"`
}

// Tree2 is a recursive generic type: its $defs name must be a valid
// reference.
type Tree2[T any] struct {
	Value T          `json:"value"`
	Kids  []Tree2[T] `json:"kids"`
}

// Embedded promotes fields of embedded structs.
type Embedded struct {
	Base
	Audit `json:"audit"` // named: not promoted
	Extra
	Name string `json:"name"`
}

type Base struct {
	ID      uint32 `json:"id" validate:"min=1"`
	Version int    `json:"version,omitempty"`
}

type Audit struct {
	By string `json:"by"`
}

type Extra struct {
	Name  string `json:"name"` // shadowed by Embedded.Name
	Notes string `json:"notes,omitempty"`
	//lint:ignore U1000 an unexported field JSON never carries
	inner int
}

// Optional covers omitempty and omitzero.
type Optional struct {
	A string            `json:"a,omitempty"`
	B int               `json:"b,omitzero"`
	C []string          `json:"c,omitempty"`
	D map[string]bool   `json:"d,omitempty"`
	E Address           `json:"e,omitzero"`
	F time.Time         `json:"f,omitzero"`
	G *int              `json:"g,omitempty"`
	H float32           `json:"h,omitempty" validate:"max=10"`
	I string            `json:"i,omitempty" validate:"min=2"` // zero breaks the rule: required
	J []int             `json:"j,omitempty" validate:"min=1"` // likewise
	K Line              `json:"k,omitzero"`                   // zero breaks rules inside: required
	L map[string]string `json:"l,omitzero" validate:"dive,max=3"`
}

// Hidden has fields JSON never carries.
type Hidden struct {
	Shown   string `json:"shown"`
	Skipped string `json:"-"`
	//lint:ignore SA5008 "-," names the member "-", as encoding/json documents
	Dash string `json:"-,"`
	//lint:ignore U1000 an unexported field JSON never carries
	private string
	Default string
}

// Forest holds two recursive types named Tree from different packages.
type Forest struct {
	Local  Tree              `json:"local"`
	Other  othertypes.Tree   `json:"other"`
	Item   Item              `json:"item"`
	Item2  othertypes.Item   `json:"item2"`
	Others []othertypes.Tree `json:"others"`
}

// NumberRules maps every number rule.
type NumberRules struct {
	Min   int     `json:"min" validate:"min=1"`
	Max   int     `json:"max" validate:"max=10"`
	Len   int     `json:"len" validate:"len=7"`
	Gt    int     `json:"gt" validate:"gt=0"`
	Gte   int     `json:"gte" validate:"gte=-3"`
	Lt    int     `json:"lt" validate:"lt=100"`
	Lte   int     `json:"lte" validate:"lte=99"`
	Range uint8   `json:"range" validate:"min=10,max=20"`
	Neg   int16   `json:"neg" validate:"max=-1"`
	Big   uint64  `json:"big" validate:"gt=18446744073709551000"`
	Low   int64   `json:"low" validate:"lt=-9223372036854775000"`
	FMin  float64 `json:"fmin" validate:"min=0.5"`
	FGt   float64 `json:"fgt" validate:"gt=0"`
	FLt   float32 `json:"flt" validate:"lt=1.5"`
	FBoth float64 `json:"fboth" validate:"gte=-2.5,lte=2.5"`
	Ptr   *int    `json:"ptr" validate:"min=3,max=4"`
	// Bounds that float32 cannot hold exactly.
	F32Max float32 `json:"f32max" validate:"max=0.3"`
	F32Gt  float32 `json:"f32gt" validate:"gt=0.1"`
}

// StringRules maps every string rule.
type StringRules struct {
	Required string  `json:"required" validate:"required"`
	Min      string  `json:"min" validate:"min=2"`
	Max      string  `json:"max" validate:"max=3"`
	Len      string  `json:"len" validate:"len=4"`
	Gt       string  `json:"gt" validate:"gt=1"`
	Gte      string  `json:"gte" validate:"gte=1"`
	Lt       string  `json:"lt" validate:"lt=3"`
	Lte      string  `json:"lte" validate:"lte=3"`
	Both     string  `json:"both" validate:"required,min=2,max=5"`
	OneOf    string  `json:"one_of" validate:"oneof=red green 'light blue'"`
	Ptr      *string `json:"ptr" validate:"min=1,max=2"`
	PtrReq   *string `json:"ptr_req" validate:"required,max=2"`
}

// SliceRules maps rules on slices and, through dive, on their elements.
type SliceRules struct {
	Min      []int     `json:"min" validate:"min=1"`
	Max      []string  `json:"max" validate:"max=2"`
	Len      []bool    `json:"len" validate:"len=2"`
	Gt       []int     `json:"gt" validate:"gt=1"`
	Lt       []int     `json:"lt" validate:"lt=2"`
	Gte      []int     `json:"gte" validate:"gte=1"`
	Lte      []int     `json:"lte" validate:"lte=2"`
	Required []string  `json:"required" validate:"required"`
	Elems    []string  `json:"elems" validate:"max=3,dive,min=1,max=2"`
	Ints     []int     `json:"ints" validate:"dive,oneof=1 2 3"`
	NonNull  []*string `json:"non_null" validate:"dive,required"`
	Nullable []*uint8  `json:"nullable" validate:"dive,max=9"`
	Matrix   [][]int8  `json:"matrix" validate:"max=2,dive,min=1,dive,gte=0"`
	Emails   []string  `json:"emails,omitempty" validate:"dive,email"`
	Floats   []float32 `json:"floats" validate:"dive,gt=-1,lt=1"`
	Lines    []*Line   `json:"lines" validate:"dive"`
}

// MapRules maps rules on maps and, through dive, on their values.
type MapRules struct {
	Min     map[string]int      `json:"min" validate:"min=1"`
	Max     map[string]int      `json:"max" validate:"max=2"`
	Len     map[string]string   `json:"len" validate:"len=1"`
	Gt      map[string]int      `json:"gt" validate:"gt=0"`
	Gte     map[string]int      `json:"gte" validate:"gte=1"`
	Lt      map[string]int      `json:"lt" validate:"lt=3"`
	Lte     map[string]int      `json:"lte" validate:"lte=2"`
	Values  map[string]string   `json:"values" validate:"dive,oneof=a b"`
	Nums    map[string]uint16   `json:"nums" validate:"max=3,dive,min=10,lte=20"`
	NonNull map[string]*int     `json:"non_null" validate:"dive,required"`
	Lists   map[string][]string `json:"lists" validate:"dive,max=2,dive,len=1"`
	Lines   map[string]Line     `json:"lines" validate:"dive"`
	Ptrs    map[string]*Line    `json:"ptrs"`
}

// NestedRules holds structs with rules inside slices and maps, with and
// without dive: the rules hold at every depth either way.
type NestedRules struct {
	Plain     []Line            `json:"plain"`
	Dived     []Line            `json:"dived" validate:"min=1,dive"`
	Ptrs      []*Line           `json:"ptrs"`
	PtrsDived []*Line           `json:"ptrs_dived" validate:"dive,required"`
	Map       map[string]Line   `json:"map"`
	MapDived  map[string]*Line  `json:"map_dived" validate:"dive,required"`
	One       Line              `json:"one"`
	MaybeOne  *Line             `json:"maybe_one"`
	Pages     []Page[Line]      `json:"pages"`
	Grouped   map[string][]Line `json:"grouped"`
	Customer  *Customer         `json:"customer"`
	Must      *Line             `json:"must" validate:"required"`
	Addresses [2]Address        `json:"addresses"`
}

// OneOfRules maps oneof on strings and integers.
type OneOfRules struct {
	Color  string  `json:"color" validate:"oneof=red green blue"`
	Size   int     `json:"size" validate:"oneof=1 2 3"`
	Small  uint8   `json:"small" validate:"oneof=0 255"`
	Signed int64   `json:"signed" validate:"oneof=-1 0 1"`
	Maybe  *string `json:"maybe" validate:"oneof=x y"`
	Word   string  `json:"word" validate:"oneof=a bb 'c c'"`
}

// FormatRules maps email, url and uuid to formats.
type FormatRules struct {
	Email   string   `json:"email" validate:"email"`
	URL     string   `json:"url" validate:"url"`
	UUID    string   `json:"uuid" validate:"uuid"`
	Maybe   *string  `json:"maybe" validate:"email"`
	Website string   `json:"website,omitempty" validate:"omitempty,url"`
	IDs     []string `json:"ids" validate:"dive,uuid"`
}

// Bytes is []byte, as base64.
type Bytes struct {
	Data     []byte   `json:"data"`
	Maybe    *[]byte  `json:"maybe"`
	Chunks   [][]byte `json:"chunks"`
	Optional []byte   `json:"optional,omitempty"`
}

// Described carries descriptions and titles from tags.
type Described struct {
	A string `json:"a" jsonschema:"description=The A field,title=A"`
	B int    `json:"b" jsonschema_description:"The B field"`
	C Status `json:"c" jsonschema:"description=Overrides the type's description"`
	D string `json:"d" jsonschema:"description=Commas\\, escaped"`
	E int    `json:"e,omitempty" jsonschema:"default=3,example=4"`
}

// The comments `carmy gen` would register for Commented.
func init() {
	const pkg = "github.com/carmy-dev/carmy/internal/corpus."
	carmy.RegisterComments(map[string]string{
		pkg + "Commented":        "Commented is described by its doc comment.",
		pkg + "Commented.Plain":  "Plain is described by its comment.",
		pkg + "Commented.Tagged": "This comment loses to the tag.",
		pkg + "Memo":             "Memo is a string with a doc comment.",
		pkg + "Page":             "Page is one page of a listing.",
		pkg + "Page.Next":        "Next is the cursor of the next page.",
	})
}

// Commented is described by doc comments registered as carmy gen does;
// tags win over comments.
type Commented struct {
	Plain  string      `json:"plain"`
	Tagged string      `json:"tagged" jsonschema:"description=The tag wins"`
	Memo   Memo        `json:"memo"`
	Page   Page[Label] `json:"page"`
}

// Memo has a registered doc comment.
type Memo string

// SchemaTags constrains fields with jsonschema tags.
type SchemaTags struct {
	Code    string  `json:"code" jsonschema:"pattern=^[A-Z]{3}-[0-9]{3}$"`
	Level   int     `json:"level" jsonschema:"minimum=1,maximum=5"`
	Ratio   float64 `json:"ratio" jsonschema:"exclusiveMinimum=0,exclusiveMaximum=1"`
	Kind    string  `json:"kind" jsonschema:"enum=a,enum=b"`
	Short   string  `json:"short" jsonschema:"minLength=1,maxLength=3"`
	List    []int   `json:"list" jsonschema:"minItems=1,maxItems=2"`
	Opt     *string `json:"opt" jsonschema:"enum=x,enum=y"`
	Step    float64 `json:"step" jsonschema:"enum=0.1,enum=0.25"`
	Present string  `json:"present,omitempty" jsonschema:"required"`
}

// FreeForm has values of any JSON type.
type FreeForm struct {
	Any  any             `json:"any"`
	Raw  json.RawMessage `json:"raw"`
	Meta map[string]any  `json:"meta"`
	List []any           `json:"list,omitempty"`
}

// Empty takes no fields.
type Empty struct{}

// Keys has member names that paths must quote.
type Keys struct {
	Dotted  string         `json:"a.b"`
	Spaced  int            `json:"with space"`
	Unicode bool           `json:"名前"`
	Nested  map[string]int `json:"nested" validate:"dive,min=0,max=1"`
}

// Deep nests rules four levels down.
type Deep struct {
	L1 struct {
		L2 []struct {
			L3 map[string]struct {
				L4 string `json:"l4" validate:"len=2"`
			} `json:"l3"`
		} `json:"l2"`
	} `json:"l1"`
}

// Grid has fixed-length arrays.
type Grid struct {
	Cells [3][2]int8 `json:"cells"`
	Ptrs  [2]*string `json:"ptrs"`
	Lines [1]Line    `json:"lines"`
}

// Inline flattens named members tagged inline into the enclosing object.
type Inline struct {
	Meta  Meta   `json:",inline"`
	Page  Paging `json:"page,inline"` // a name and inline: still flattened
	Title string `json:"title"`
}

// Meta is inlined in Inline.
type Meta struct {
	Owner   string `json:"owner" validate:"required"`
	Version uint16 `json:"version"`
}

// Paging is inlined in Inline.
type Paging struct {
	Offset uint32 `json:"offset"`
	Limit  uint8  `json:"limit" validate:"max=100"`
}

// ByteArrays are arrays of integers, not base64 strings.
type ByteArrays struct {
	IPv4   [4]byte     `json:"ipv4"`
	Digest [8]uint8    `json:"digest"`
	Maybe  *[2]byte    `json:"maybe"`
	Many   [][3]byte   `json:"many"`
	Blob   []byte      `json:"blob"`
	Fixed  [0]byte     `json:"fixed"`
	IDs    [2]int16    `json:"ids"`
	Named  [2]Priority `json:"named"`
	Nested [2][2]byte  `json:"nested"`
}

// Durations are strings in Go's syntax.
type Durations struct {
	Timeout time.Duration            `json:"timeout"`
	Retry   *time.Duration           `json:"retry"`
	Steps   []time.Duration          `json:"steps"`
	ByName  map[string]time.Duration `json:"by_name"`
	Maybe   time.Duration            `json:"maybe,omitempty"`
}

// Containers mixes maps, pointers, times and uuids at several depths.
type Containers struct {
	Counts  map[string]int             `json:"counts"`
	Ptrs    map[string]*string         `json:"ptrs"`
	Nested  map[string]map[string]bool `json:"nested"`
	PtrPtr  **int                      `json:"ptr_ptr"`
	Lines   []*Line                    `json:"lines"`
	When    time.Time                  `json:"when"`
	Whens   []time.Time                `json:"whens"`
	ID      uuid.UUID                  `json:"id"`
	IDs     map[string]uuid.UUID       `json:"ids"`
	Opt     *Address                   `json:"opt,omitempty"`
	Zeroed  Line                       `json:"zeroed,omitzero"`
	Strings []string                   `json:"strings,omitempty"`
	F32     float32                    `json:"f32"`
	F64s    []float64                  `json:"f64s"`
}

// Decimal is an exact amount with two decimal places that travels as a
// string ("12.50"): a type with its own JSON and its own schema.
type Decimal struct {
	Cents int64
}

// MarshalJSON writes the amount as a string.
func (d Decimal) MarshalJSON() ([]byte, error) {
	sign, c := "", d.Cents
	if c < 0 {
		sign, c = "-", -c
	}
	return []byte(fmt.Sprintf(`"%s%d.%02d"`, sign, c/100, c%100)), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	neg := strings.HasPrefix(s, "-")
	whole, frac, ok := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	w, err1 := strconv.ParseInt(whole, 10, 64)
	f, err2 := strconv.ParseInt(frac, 10, 64)
	if !ok || len(frac) != 2 || err1 != nil || err2 != nil || w > math.MaxInt64/100-1 {
		return fmt.Errorf("%q is not an amount such as \"12.50\"", s)
	}
	d.Cents = w*100 + f
	if neg {
		d.Cents = -d.Cents
	}
	return nil
}

// JSONSchema declares the string form.
func (Decimal) JSONSchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type:        "string",
		Pattern:     `^-?(0|[1-9][0-9]{0,15})\.[0-9]{2}$`,
		Description: "An amount with two decimal places, such as \"12.50\".",
		Examples:    []any{"0.00", "12.50", "-3.05", "9999999999999999.99"},
	}
}

// Opaque holds types with their own JSON at several places.
type Opaque struct {
	Price    Decimal            `json:"price"`
	Discount *Decimal           `json:"discount"`
	Lines    []Decimal          `json:"lines"`
	ByCode   map[string]Decimal `json:"by_code"`
	Optional Decimal            `json:"optional,omitzero"`
}

// RequiredValues holds required as the validator reads it: non-zero for
// values (the nil UUID, the zero time and an array of zeros refused),
// non-nil for pointers (a *string may be "").
type RequiredValues struct {
	ID     uuid.UUID   `json:"id" validate:"required"`
	At     time.Time   `json:"at" validate:"required"`
	Key    [3]uint8    `json:"key" validate:"required"`
	Name   *string     `json:"name" validate:"required"`
	IDs    []uuid.UUID `json:"ids" validate:"dive,required"`
	Label  string      `json:"label" validate:"required"`
	Count  *int        `json:"count" validate:"required"`
	Stamps []time.Time `json:"stamps,omitempty" validate:"dive,required"`
}

// OmitemptyRules are "optional but valid": the rules after omitempty hold
// unless the value is empty.
type OmitemptyRules struct {
	Homepage string            `json:"homepage,omitempty" validate:"omitempty,url"`
	Nick     string            `json:"nick,omitempty" validate:"omitempty,min=3,max=40"`
	Code     string            `json:"code" validate:"omitempty,len=4"`
	Color    string            `json:"color,omitempty" validate:"omitempty,oneof=red green"`
	Age      int               `json:"age,omitempty" validate:"omitempty,min=18,max=130"`
	Ratio    float64           `json:"ratio,omitempty" validate:"omitempty,gt=0.5,lte=2"`
	Tags     []string          `json:"tags" validate:"omitempty,min=2,dive,omitempty,min=2"`
	Labels   map[string]string `json:"labels,omitempty" validate:"omitempty,min=1,max=3"`
	Note     *string           `json:"note,omitempty" validate:"omitempty,min=2"`
}

// OmitemptyPointers holds rules after omitempty as the validator reads them
// on pointers and collections: a nil pointer and an absent slice or map
// skip them; a non-nil pointer ("" and 0 included) and a present slice or
// map ([] and {} included) keep them.
type OmitemptyPointers struct {
	Category *string           `json:"category,omitempty" validate:"omitempty,oneof=a b"`
	Note     *string           `json:"note" validate:"omitempty,min=3"`
	Count    *int              `json:"count,omitempty" validate:"omitempty,min=1"`
	Ratio    *float64          `json:"ratio,omitempty" validate:"omitempty,gt=0,lte=1"`
	Level    *uint8            `json:"level,omitempty" validate:"omitempty,oneof=0 2 4"`
	Tags     []string          `json:"tags" validate:"omitempty,min=2,dive,oneof=x y z"`
	Labels   map[string]string `json:"labels,omitempty" validate:"omitempty,min=1,max=2,dive,omitempty,max=3"`
	Maybe    []*string         `json:"maybe,omitempty" validate:"omitempty,max=2,dive,omitempty,len=2"`
	List     *[]int            `json:"list,omitempty" validate:"omitempty,min=1"`
	Grid     [][]int8          `json:"grid,omitempty" validate:"dive,omitempty,len=2"`
}
