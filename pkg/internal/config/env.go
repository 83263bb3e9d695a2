package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// envAliases are conventional names accepted besides the derived ones.
var envAliases = map[string]string{
	"mate.llm.base-url": "OPENAI_BASE_URL",
	"mate.llm.api-key":  "OPENAI_API_KEY",
}

// EnvName derives the environment variable for a property path.
func EnvName(path string) string {
	return strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(path))
}

// Keys lists every property path with its environment name, for documentation.
func Keys() []string {
	var out []string
	walk(reflect.ValueOf(&Config{}).Elem(), "", func(path string, _ reflect.Value) error {
		out = append(out, path)
		return nil
	})
	return out
}

func walk(v reflect.Value, prefix string, fn func(path string, field reflect.Value) error) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		path := tag
		if prefix != "" {
			path = prefix + "." + tag
		}
		fv := v.Field(i)
		if fv.Kind() == reflect.Struct {
			if err := walk(fv, path, fn); err != nil {
				return err
			}
			continue
		}
		if err := fn(path, fv); err != nil {
			return err
		}
	}
	return nil
}

func applyEnv(cfg *Config, env func(string) (string, bool)) error {
	return walk(reflect.ValueOf(cfg).Elem(), "", func(path string, fv reflect.Value) error {
		name := EnvName(path)
		raw, ok := env(name)
		if !ok {
			alias, has := envAliases[path]
			if !has {
				return nil
			}
			if raw, ok = env(alias); !ok {
				return nil
			}
			name = alias
		}
		if err := setField(fv, raw); err != nil {
			return fmt.Errorf("environment %s (%s): %w", name, path, err)
		}
		return nil
	})
}

func setField(fv reflect.Value, raw string) error {
	raw = strings.TrimSpace(raw)
	switch fv.Kind() {
	case reflect.String:
		fv.SetString(raw)
	case reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("%q is not a boolean; accepted: true or false", raw)
		}
		fv.SetBool(b)
	case reflect.Int:
		n, err := strconv.Atoi(raw)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", raw)
		}
		fv.SetInt(int64(n))
	case reflect.Float64:
		x, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", raw)
		}
		fv.SetFloat(x)
	case reflect.Slice:
		if fv.Type() == reflect.TypeOf([]APIKey{}) {
			keys, err := ParseKeys(raw)
			if err != nil {
				return err
			}
			fv.Set(reflect.ValueOf(keys))
			return nil
		}
		if fv.Type() == reflect.TypeOf([]string{}) {
			var list []string
			for _, v := range strings.Split(raw, ",") {
				if v = strings.TrimSpace(v); v != "" {
					list = append(list, v)
				}
			}
			fv.Set(reflect.ValueOf(list))
			return nil
		}
		return fmt.Errorf("unsupported list setting")
	default:
		return fmt.Errorf("unsupported setting type %s", fv.Kind())
	}
	return nil
}

// ParseKeys reads the compact key syntax used in MATE_AUTH_KEYS:
// "key1=1,2;key2=*;opskey=admin" (admin keys may also list agents: "k=admin,*").
func ParseKeys(raw string) ([]APIKey, error) {
	var keys []APIKey
	for _, part := range strings.Split(raw, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		key, scope, ok := strings.Cut(part, "=")
		if !ok || strings.TrimSpace(key) == "" || strings.TrimSpace(scope) == "" {
			return nil, fmt.Errorf("%q: expected key=agentIds, e.g. \"secret=1,2\", \"secret=*\" or \"secret=admin\"", part)
		}
		k := APIKey{Key: strings.TrimSpace(key)}
		for _, s := range strings.Split(scope, ",") {
			s = strings.TrimSpace(s)
			switch {
			case s == "admin":
				k.Admin = true
			case s != "":
				k.Agents = append(k.Agents, s)
			}
		}
		keys = append(keys, k)
	}
	return keys, nil
}
