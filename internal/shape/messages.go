package shape

import (
	"fmt"
	"reflect"
	"strings"
)

// InSchema reports whether the validate rule name is one carmy states in a
// schema, on the kinds it applies to (bounds and lengths, oneof, required,
// the formats), or one that only steers the others (omitempty, dive). Every
// other rule is checked by the validator when the tool is called, where a
// model reading the schema cannot see it. carmy vet reads this table too.
func InSchema(name string) bool { return schemaRules[name] }

var schemaRules = map[string]bool{
	"required": true, "min": true, "max": true, "len": true, "gt": true, "gte": true, "lt": true, "lte": true,
	"oneof": true, "email": true, "url": true, "http_url": true,
	"uuid": true, "uuid4": true, "uuid_rfc4122": true, "uuid4_rfc4122": true,
	"omitempty": true, "omitnil": true, "omitzero": true, "dive": true,
}

// RuleMessage words a validate rule as a person would say what it asks of
// a value, in the form of carmy's field errors: "must not be 0", "must
// contain only ASCII letters", not "must satisfy the rule ne=0". tag is
// the rule, with its parameter ("ne=0"), or alternatives joined with |;
// kind is the kind of the value it applies to, past pointers, which decides
// whether a number compares the value or counts its characters, items or
// members. A rule carmy does not know is named as it is written.
func RuleMessage(tag string, kind reflect.Kind) string {
	if alts := strings.Split(tag, "|"); len(alts) > 1 {
		msgs := make([]string, len(alts))
		for i, a := range alts {
			msgs[i] = RuleMessage(a, kind)
		}
		return strings.Join(msgs, ", or ")
	}
	name, param, _ := strings.Cut(tag, "=")
	return ruleMessage(name, param, kind)
}

func ruleMessage(name, p string, kind reflect.Kind) string {
	if m, ok := sizeMessage(name, p, kind); ok {
		return m
	}
	if m, ok := simpleMessages[name]; ok {
		return m
	}
	switch name {
	case "oneof", "oneofci", "noneof", "noneofci":
		words := splitOneOf(p)
		for i, w := range words {
			if kind == reflect.String {
				words[i] = fmt.Sprintf("%q", w)
			}
		}
		m := "must be one of " + strings.Join(words, ", ")
		if strings.HasPrefix(name, "none") {
			m = "must not be any of " + strings.Join(words, ", ")
		}
		if strings.HasSuffix(name, "ci") {
			m += ", in any case"
		}
		return m
	case "eq_ignore_case":
		return fmt.Sprintf("must be %q, in any case", p)
	case "ne_ignore_case":
		return fmt.Sprintf("must not be %q, in any case", p)
	case "contains":
		return fmt.Sprintf("must contain %q", p)
	case "containsany":
		return fmt.Sprintf("must contain at least one of the characters %q", p)
	case "containsrune":
		return fmt.Sprintf("must contain the character %q", p)
	case "excludes":
		return fmt.Sprintf("must not contain %q", p)
	case "excludesall":
		return fmt.Sprintf("must not contain any of the characters %q", p)
	case "excludesrune":
		return fmt.Sprintf("must not contain the character %q", p)
	case "startswith":
		return fmt.Sprintf("must start with %q", p)
	case "endswith":
		return fmt.Sprintf("must end with %q", p)
	case "startsnotwith":
		return fmt.Sprintf("must not start with %q", p)
	case "endsnotwith":
		return fmt.Sprintf("must not end with %q", p)
	case "datetime":
		return fmt.Sprintf("must be a date or time in Go's layout %q", p)
	case "unique":
		if p != "" {
			return fmt.Sprintf("must not hold two items with the same %s", p)
		}
		return "must not contain duplicates"
	case "eqfield", "eqcsfield":
		return fmt.Sprintf("must equal field %s", p)
	case "nefield", "necsfield":
		return fmt.Sprintf("must differ from field %s", p)
	case "gtfield", "gtcsfield":
		return fmt.Sprintf("must be greater than field %s", p)
	case "gtefield", "gtecsfield":
		return fmt.Sprintf("must be at least field %s", p)
	case "ltfield", "ltcsfield":
		return fmt.Sprintf("must be less than field %s", p)
	case "ltefield", "ltecsfield":
		return fmt.Sprintf("must be at most field %s", p)
	case "fieldcontains":
		return fmt.Sprintf("must contain the value of field %s", p)
	case "fieldexcludes":
		return fmt.Sprintf("must not contain the value of field %s", p)
	case "required_if", "required_unless", "required_with", "required_with_all", "required_without", "required_without_all":
		return "is required here: " + strings.ReplaceAll(strings.TrimPrefix(name, "required_"), "_", " ") + " " + p
	case "excluded_if", "excluded_unless", "excluded_with", "excluded_with_all", "excluded_without", "excluded_without_all":
		return "must be left out here: " + strings.ReplaceAll(strings.TrimPrefix(name, "excluded_"), "_", " ") + " " + p
	}
	if p != "" {
		return fmt.Sprintf("must satisfy the rule %s=%s", name, p)
	}
	return fmt.Sprintf("must satisfy the rule %s", name)
}

// sizeMessage words the rules that compare a number, or count the
// characters of a string, the items of a slice or array, or the members of
// a map.
func sizeMessage(name, p string, kind reflect.Kind) (string, bool) {
	switch name {
	case "min", "max", "len", "gt", "gte", "lt", "lte", "eq", "ne":
	default:
		return "", false
	}
	var noun string
	switch kind {
	case reflect.String:
		noun = "characters"
	case reflect.Slice, reflect.Array:
		noun = "items"
	case reflect.Map:
		noun = "members"
	case reflect.Bool:
		if name == "eq" {
			return "must be " + p, true
		}
		if name == "ne" {
			return "must not be " + p, true
		}
	}
	if noun == "" { // a number, or a value compared as one (time.Duration)
		switch name {
		case "min", "gte":
			return "must be at least " + p, true
		case "max", "lte":
			return "must be at most " + p, true
		case "gt":
			return "must be greater than " + p, true
		case "lt":
			return "must be less than " + p, true
		case "len", "eq":
			return "must be " + p, true
		}
		return "must not be " + p, true
	}
	if p == "1" {
		noun = strings.TrimSuffix(noun, "s")
	}
	switch name {
	case "min", "gte":
		return fmt.Sprintf("must have at least %s %s", p, noun), true
	case "max", "lte":
		return fmt.Sprintf("must have at most %s %s", p, noun), true
	case "gt":
		return fmt.Sprintf("must have more than %s %s", p, noun), true
	case "lt":
		return fmt.Sprintf("must have fewer than %s %s", p, noun), true
	case "len":
		return fmt.Sprintf("must have exactly %s %s", p, noun), true
	case "eq":
		if kind == reflect.String {
			return fmt.Sprintf("must be %q", p), true
		}
		return fmt.Sprintf("must have exactly %s %s", p, noun), true
	}
	if kind == reflect.String {
		return fmt.Sprintf("must not be %q", p), true
	}
	return fmt.Sprintf("must not have exactly %s %s", p, noun), true
}

// simpleMessages are the rules without a parameter that change the words.
var simpleMessages = map[string]string{
	"required":                   "is required",
	"isdefault":                  "must be left empty",
	"email":                      "must be a valid email address",
	"url":                        "must be a valid URL",
	"http_url":                   "must be a valid http or https URL",
	"https_url":                  "must be a valid https URL",
	"uri":                        "must be a valid URI",
	"urn_rfc2141":                "must be a valid URN",
	"urn_rfc8141":                "must be a valid URN",
	"uuid":                       "must be a valid UUID",
	"uuid3":                      "must be a valid version 3 UUID",
	"uuid4":                      "must be a valid version 4 UUID",
	"uuid5":                      "must be a valid version 5 UUID",
	"uuid7":                      "must be a valid version 7 UUID",
	"uuid_rfc4122":               "must be a valid UUID",
	"uuid3_rfc4122":              "must be a valid version 3 UUID",
	"uuid4_rfc4122":              "must be a valid version 4 UUID",
	"uuid5_rfc4122":              "must be a valid version 5 UUID",
	"ulid":                       "must be a valid ULID",
	"alpha":                      "must contain only ASCII letters",
	"alphaspace":                 "must contain only ASCII letters and spaces",
	"alphanum":                   "must contain only ASCII letters and digits",
	"alphanumspace":              "must contain only ASCII letters, digits and spaces",
	"alphaunicode":               "must contain only letters",
	"alphanumunicode":            "must contain only letters and digits",
	"numeric":                    "must be a number written in digits",
	"number":                     "must contain only digits",
	"boolean":                    "must be a boolean (true, false, 1, 0, t, f...)",
	"hexadecimal":                "must be a hexadecimal number",
	"hexcolor":                   "must be a hex color such as #1a2b3c",
	"rgb":                        "must be an rgb() color",
	"rgba":                       "must be an rgba() color",
	"hsl":                        "must be an hsl() color",
	"hsla":                       "must be an hsla() color",
	"lowercase":                  "must be lowercase",
	"uppercase":                  "must be uppercase",
	"ascii":                      "must contain only ASCII characters",
	"printascii":                 "must contain only printable ASCII characters",
	"multibyte":                  "must contain a multibyte character",
	"e164":                       "must be a phone number in E.164 form, such as +14155552671",
	"ip":                         "must be a valid IP address",
	"ipv4":                       "must be a valid IPv4 address",
	"ipv6":                       "must be a valid IPv6 address",
	"ip_addr":                    "must be a resolvable IP address",
	"cidr":                       "must be a valid CIDR block",
	"cidrv4":                     "must be a valid IPv4 CIDR block",
	"cidrv6":                     "must be a valid IPv6 CIDR block",
	"mac":                        "must be a valid MAC address",
	"hostname":                   "must be a valid hostname",
	"hostname_rfc1123":           "must be a valid hostname",
	"hostname_port":              "must be a host and a port, such as example.com:443",
	"fqdn":                       "must be a fully qualified domain name",
	"port":                       "must be a port number",
	"json":                       "must be valid JSON",
	"jwt":                        "must be a JSON Web Token",
	"base64":                     "must be valid base64",
	"base64url":                  "must be valid URL-safe base64",
	"base64rawurl":               "must be valid unpadded URL-safe base64",
	"base32":                     "must be valid base32",
	"html":                       "must be HTML",
	"html_encoded":               "must be HTML-encoded",
	"url_encoded":                "must be URL-encoded",
	"latitude":                   "must be a latitude, from -90 to 90",
	"longitude":                  "must be a longitude, from -180 to 180",
	"semver":                     "must be a semantic version such as 1.2.3",
	"cron":                       "must be a cron expression",
	"timezone":                   "must be an IANA time zone name such as Europe/Paris",
	"iso3166_1_alpha2":           "must be a two-letter country code (ISO 3166-1)",
	"iso3166_1_alpha3":           "must be a three-letter country code (ISO 3166-1)",
	"iso3166_1_alpha_numeric":    "must be a numeric country code (ISO 3166-1)",
	"iso4217":                    "must be a currency code such as EUR (ISO 4217)",
	"bcp47_language_tag":         "must be a language tag such as en-US (BCP 47)",
	"bcp47_strict_language_tag":  "must be a language tag such as en-US (BCP 47)",
	"credit_card":                "must be a valid card number",
	"luhn_checksum":              "must pass the Luhn checksum",
	"md5":                        "must be an MD5 hash in hexadecimal",
	"sha256":                     "must be a SHA-256 hash in hexadecimal",
	"sha512":                     "must be a SHA-512 hash in hexadecimal",
	"datauri":                    "must be a data URI",
	"file":                       "must name an existing file",
	"dir":                        "must name an existing directory",
	"duration":                   "must be a duration such as 1h30m",
	"image":                      "must name an image file",
	"mongodb":                    "must be a MongoDB object id",
	"mongodb_connection_string":  "must be a MongoDB connection string",
	"isbn":                       "must be a valid ISBN",
	"isbn10":                     "must be a valid ISBN-10",
	"isbn13":                     "must be a valid ISBN-13",
	"ssn":                        "must be a US social security number",
	"iso3166_1_alpha2_eu":        "must be the two-letter code of an EU country",
	"iso3166_1_alpha3_eu":        "must be the three-letter code of an EU country",
	"iso3166_1_alpha_numeric_eu": "must be the numeric code of an EU country",
}
