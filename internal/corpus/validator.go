package corpus

import (
	"context"
	"reflect"

	"github.com/carmy-dev/carmy"
)

// Validated is one type of the validator corpus: a tool input written the
// way go-playground/validator's users write them, whose every decoded value
// the root package's tests hand to validator.Struct.
type Validated struct {
	Name string
	Go   reflect.Type
	// Tool declares a tool taking the type as input; got receives every
	// input the tool is called with, as a pointer to a value of Go.
	Tool func(name string, got func(any)) *carmy.ToolDef
}

func validated[T any](name string) Validated {
	return Validated{Name: name, Go: reflect.TypeFor[T](), Tool: func(tool string, got func(any)) *carmy.ToolDef {
		return carmy.Tool(func(_ context.Context, in T) error {
			got(&in)
			return nil
		}, carmy.Write, carmy.Register(false), carmy.Name(tool))
	}}
}

// ValidatorTypes is the validator corpus. Its types keep to what carmy and
// the validator read alike: a pointer with rules says omitempty, omitnil or
// required (carmy lets a pointer without them be null, where the validator
// would check the rules on nil), and a slice or map of structs with rules
// says dive (carmy checks them at every depth, the validator only after
// dive).
var ValidatorTypes = []Validated{
	validated[VIssue]("issue"),
	validated[VPtrStrings]("ptr_strings"),
	validated[VPtrNumbers]("ptr_numbers"),
	validated[VPtrCollections]("ptr_collections"),
	validated[VSlices]("slices"),
	validated[VSliceElems]("slice_elems"),
	validated[VMaps]("maps"),
	validated[VMapElems]("map_elems"),
	validated[VNested]("nested"),
	validated[VNestedPtr]("nested_ptr"),
	validated[VDiveStructs]("dive_structs"),
	validated[VRequired]("required"),
	validated[VOmitemptyValues]("omitempty_values"),
	validated[VOneOf]("oneof"),
	validated[VNumbers]("numbers"),
	validated[VStrings]("strings"),
	validated[VNeEq]("ne_eq"),
	validated[VOmitnil]("omitnil"),
	validated[VMatrix]("matrix"),
	validated[VMixed]("mixed"),
	validated[VFloats]("floats"),
	validated[VUnsigned]("unsigned"),
}

// VIssue is the type that showed rules after omitempty on pointers and
// slices read differently by carmy and the validator.
type VIssue struct {
	Category *string  `json:"category,omitempty" validate:"omitempty,oneof=a b"`
	Note     *string  `json:"note" validate:"omitempty,min=3"`
	Count    *int     `json:"count,omitempty" validate:"omitempty,min=1"`
	Tags     []string `json:"tags" validate:"omitempty,min=2,dive,oneof=x y z"`
}

// VPtrStrings has string rules on pointers.
type VPtrStrings struct {
	Min   *string `json:"min,omitempty" validate:"omitempty,min=2"`
	Max   *string `json:"max,omitempty" validate:"omitempty,max=3"`
	Len   *string `json:"len,omitempty" validate:"omitempty,len=2"`
	Gt    *string `json:"gt,omitempty" validate:"omitempty,gt=1"`
	Lt    *string `json:"lt,omitempty" validate:"omitempty,lt=3"`
	Req   *string `json:"req" validate:"required,max=2"`
	OneOf *string `json:"one_of" validate:"omitempty,oneof=x 'y z'"`
}

// VPtrNumbers has number rules on pointers.
type VPtrNumbers struct {
	Min   *int     `json:"min,omitempty" validate:"omitempty,min=1"`
	Max   *int8    `json:"max" validate:"omitempty,max=-1"`
	Gt    *int64   `json:"gt,omitempty" validate:"omitempty,gt=0"`
	Gte   *uint16  `json:"gte,omitempty" validate:"omitempty,gte=2"`
	Lt    *int32   `json:"lt,omitempty" validate:"omitempty,lt=0"`
	Lte   *int     `json:"lte,omitempty" validate:"omitempty,lte=-5"`
	Len   *int     `json:"len,omitempty" validate:"omitempty,len=3"`
	OneOf *int     `json:"one_of,omitempty" validate:"omitempty,oneof=0 5"`
	Float *float64 `json:"float,omitempty" validate:"omitempty,gt=0.5"`
	Req   *int     `json:"req" validate:"required,min=-1,max=1"`
}

// VPtrCollections has rules on pointers to slices and maps.
type VPtrCollections struct {
	List  *[]string          `json:"list,omitempty" validate:"omitempty,min=1,max=2"`
	Map   *map[string]int    `json:"map,omitempty" validate:"omitempty,len=1"`
	Items *[]int             `json:"items" validate:"omitempty,gt=1,dive,min=0"`
	Req   *[]bool            `json:"req" validate:"required,max=1"`
	Deep  *map[string][]int8 `json:"deep,omitempty" validate:"omitempty,dive,min=1"`
}

// VSlices has rules on slices, empty ones included.
type VSlices struct {
	Opt      []string `json:"opt,omitempty" validate:"omitempty,min=2"`
	OptMax   []int    `json:"opt_max,omitempty" validate:"omitempty,max=1"`
	Always   []int    `json:"always" validate:"omitempty,len=2"`
	Min      []int    `json:"min" validate:"min=1"`
	Lt       []string `json:"lt" validate:"lt=3"`
	Gte      []bool   `json:"gte,omitempty" validate:"omitempty,gte=1"`
	Required []string `json:"required" validate:"required"`
}

// VSliceElems has rules on elements through dive.
type VSliceElems struct {
	Words   []string  `json:"words" validate:"dive,min=2,max=4"`
	OptWord []string  `json:"opt_word" validate:"dive,omitempty,len=3"`
	Nums    []int     `json:"nums,omitempty" validate:"omitempty,min=1,dive,gte=-2,lte=2"`
	Ptrs    []*string `json:"ptrs" validate:"dive,omitempty,oneof=a b"`
	NonNull []*int    `json:"non_null" validate:"dive,required,gt=0"`
	Nils    []*uint8  `json:"nils,omitempty" validate:"omitempty,max=3,dive,omitnil,max=9"`
}

// VMaps has rules on maps, empty ones included.
type VMaps struct {
	Opt    map[string]int    `json:"opt,omitempty" validate:"omitempty,min=1"`
	Always map[string]string `json:"always" validate:"omitempty,max=1"`
	Len    map[string]bool   `json:"len" validate:"len=1"`
	Gt     map[string]int    `json:"gt,omitempty" validate:"omitempty,gt=1"`
	Req    map[string]int    `json:"req" validate:"required"`
}

// VMapElems has rules on map values through dive.
type VMapElems struct {
	Words  map[string]string           `json:"words" validate:"dive,oneof=on off"`
	Nums   map[string]int16            `json:"nums,omitempty" validate:"omitempty,max=2,dive,min=1"`
	Ptrs   map[string]*string          `json:"ptrs" validate:"dive,omitempty,min=2"`
	Lists  map[string][]string         `json:"lists" validate:"dive,omitempty,min=1,dive,len=1"`
	Nested map[string]map[string]uint8 `json:"nested,omitempty" validate:"omitempty,dive,max=1,dive,lt=5"`
}

// VLine is a nested struct with rules.
type VLine struct {
	SKU      string  `json:"sku" validate:"required,max=4"`
	Quantity int     `json:"quantity" validate:"min=1,max=9"`
	Note     *string `json:"note,omitempty" validate:"omitempty,min=2"`
}

// VNested holds structs inside structs.
type VNested struct {
	Line  VLine `json:"line"`
	Inner struct {
		Code  string   `json:"code" validate:"omitempty,len=2"`
		Level *int     `json:"level" validate:"omitempty,oneof=1 2"`
		Tags  []string `json:"tags" validate:"omitempty,max=1"`
	} `json:"inner"`
}

// VNestedPtr holds structs behind pointers.
type VNestedPtr struct {
	Line  *VLine `json:"line,omitempty"`
	Must  *VLine `json:"must" validate:"required"`
	Maybe *VLine `json:"maybe" validate:"omitempty"`
}

// VDiveStructs holds structs in slices and maps, with dive.
type VDiveStructs struct {
	Lines  []VLine           `json:"lines" validate:"min=1,dive"`
	Opt    []VLine           `json:"opt,omitempty" validate:"omitempty,max=2,dive"`
	Ptrs   []*VLine          `json:"ptrs" validate:"dive"`
	Req    []*VLine          `json:"req" validate:"dive,required"`
	ByName map[string]VLine  `json:"by_name" validate:"dive"`
	ByPtr  map[string]*VLine `json:"by_ptr,omitempty" validate:"omitempty,dive,required"`
}

// VRequired is required as the validator reads it.
type VRequired struct {
	Name  string          `json:"name" validate:"required"`
	Ptr   *string         `json:"ptr" validate:"required"`
	Num   *int            `json:"num" validate:"required"`
	List  []int           `json:"list" validate:"required"`
	Map   map[string]bool `json:"map" validate:"required"`
	Elems []string        `json:"elems" validate:"dive,required"`
	Flag  *bool           `json:"flag" validate:"required"`
}

// VOmitemptyValues has rules after omitempty on values that are not
// pointers: "" and 0 skip them.
type VOmitemptyValues struct {
	Nick  string  `json:"nick,omitempty" validate:"omitempty,min=3,max=5"`
	Code  string  `json:"code" validate:"omitempty,len=2"`
	Age   int     `json:"age,omitempty" validate:"omitempty,gte=18"`
	Score int8    `json:"score" validate:"omitempty,lt=-3"`
	Color string  `json:"color,omitempty" validate:"omitempty,oneof=red blue"`
	Ratio float64 `json:"ratio,omitempty" validate:"omitempty,gt=1,lte=2"`
}

// VOneOf has oneof on strings and integers, plain and after omitempty.
type VOneOf struct {
	Color string   `json:"color" validate:"oneof=red green"`
	Size  int      `json:"size" validate:"oneof=1 2 3"`
	Opt   string   `json:"opt,omitempty" validate:"omitempty,oneof=a b"`
	Small uint8    `json:"small" validate:"oneof=0 7"`
	Ptr   *int64   `json:"ptr,omitempty" validate:"omitempty,oneof=-1 1"`
	List  []string `json:"list" validate:"dive,oneof=p q"`
}

// VNumbers has every number rule.
type VNumbers struct {
	Min int   `json:"min" validate:"min=1"`
	Max int   `json:"max" validate:"max=10"`
	Len int   `json:"len" validate:"len=7"`
	Gt  int   `json:"gt" validate:"gt=0"`
	Gte int16 `json:"gte" validate:"gte=-3"`
	Lt  int   `json:"lt" validate:"lt=100"`
	Lte int32 `json:"lte" validate:"lte=99"`
	Ne  int   `json:"ne" validate:"ne=5"`
}

// VStrings has every string rule.
type VStrings struct {
	Min string `json:"min" validate:"min=2"`
	Max string `json:"max" validate:"max=3"`
	Len string `json:"len" validate:"len=4"`
	Gt  string `json:"gt" validate:"gt=1"`
	Gte string `json:"gte" validate:"gte=1"`
	Lt  string `json:"lt" validate:"lt=3"`
	Lte string `json:"lte" validate:"lte=3"`
	Req string `json:"req" validate:"required,max=5"`
}

// VNeEq has the rules only the validator checks, at call time.
type VNeEq struct {
	NotZero  int      `json:"not_zero" validate:"ne=0"`
	Three    *int     `json:"three,omitempty" validate:"omitempty,eq=3"`
	NotAdmin string   `json:"not_admin" validate:"ne=admin"`
	Yes      string   `json:"yes,omitempty" validate:"omitempty,eq=yes"`
	PtrNe    *int     `json:"ptr_ne,omitempty" validate:"omitempty,ne=0"`
	Elems    []int    `json:"elems" validate:"dive,ne=1"`
	Count    []string `json:"count" validate:"omitempty,ne=1"`
}

// VOmitnil has omitnil, which skips only nil.
type VOmitnil struct {
	Name  *string  `json:"name" validate:"omitnil,min=2"`
	Count *int     `json:"count,omitempty" validate:"omitnil,max=3"`
	List  *[]int   `json:"list" validate:"omitnil,min=1"`
	Elems []*int16 `json:"elems" validate:"dive,omitnil,gte=0"`
}

// VMatrix has dive twice.
type VMatrix struct {
	Grid  [][]int8          `json:"grid" validate:"max=2,dive,omitempty,min=1,dive,gte=0"`
	Words [][]string        `json:"words,omitempty" validate:"omitempty,dive,max=2,dive,required"`
	ByRow map[string][]int  `json:"by_row" validate:"dive,len=2,dive,lt=3"`
	Cells [2][2]uint8       `json:"cells" validate:"dive,dive,max=5"`
	Maybe []*[]string       `json:"maybe,omitempty" validate:"omitempty,dive,omitempty,min=1"`
	Sets  []map[string]bool `json:"sets" validate:"dive,omitempty,max=1"`
}

// VMixed puts many kinds of rules side by side.
type VMixed struct {
	ID      string            `json:"id" validate:"required,len=3"`
	Kind    *string           `json:"kind,omitempty" validate:"omitempty,oneof=a b c"`
	Limit   *int              `json:"limit,omitempty" validate:"omitempty,min=1,max=20"`
	Lines   []VLine           `json:"lines,omitempty" validate:"omitempty,min=1,dive"`
	Labels  map[string]string `json:"labels,omitempty" validate:"omitempty,max=2,dive,required"`
	Parent  *VLine            `json:"parent,omitempty"`
	Flags   []bool            `json:"flags" validate:"max=2"`
	Percent float32           `json:"percent" validate:"gte=0,lte=100"`
}

// VFloats has float rules.
type VFloats struct {
	Gt    float64   `json:"gt" validate:"gt=0"`
	Range float32   `json:"range" validate:"gte=-1.5,lte=1.5"`
	Opt   float64   `json:"opt,omitempty" validate:"omitempty,lt=-1"`
	Ptr   *float32  `json:"ptr,omitempty" validate:"omitempty,gte=2"`
	Elems []float64 `json:"elems" validate:"dive,gt=-1,lt=1"`
}

// VUnsigned has rules on unsigned integers.
type VUnsigned struct {
	Min   uint     `json:"min" validate:"min=1"`
	Max   uint8    `json:"max" validate:"max=200"`
	Opt   uint16   `json:"opt,omitempty" validate:"omitempty,gte=100"`
	Ptr   *uint32  `json:"ptr,omitempty" validate:"omitempty,lt=10"`
	Elems []uint64 `json:"elems" validate:"omitempty,max=3,dive,gt=0"`
}
