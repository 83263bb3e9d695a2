package guard

import (
	"strings"
	"unicode/utf8"
)

// The necessary conditions of the secret patterns (pattern.mayMatch). Each returns false
// only when its pattern cannot match s; what it checks is written next to the part of the
// pattern it comes from. They reason on bytes: a byte >= 0x80 is never an ASCII word
// character, and Go's \b and \s are ASCII-only (\s is [\t\n\f\r ]).
//
// Under (?i), Go's case folding lets 's' match ſ (U+017F) and 'k' match K (U+212A, Kelvin
// sign), and a class [a-z] matches both too; no other non-ASCII rune folds to an ASCII
// letter. The case-insensitive checks below (foldPrefix, foldSuffix, bearerClass) accept
// them. Their UTF-8 encodings start with a lead byte, so wherever their bytes stand in s,
// the regexp decodes them as that rune.

// mayContain is the condition of a pattern that starts with (or contains) lit.
func mayContain(lit string) func(string) bool {
	return func(s string) bool { return strings.Contains(s, lit) }
}

// mayPEM: `-----BEGIN ...-----[\s\S]*?-----END ...`.
func mayPEM(s string) bool {
	i := strings.Index(s, "-----BEGIN ")
	return i >= 0 && strings.Contains(s[i:], "-----END ")
}

// maySK: `\bsk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}`; the optional prefix is
// made of the same characters, so at least 20 of them follow "sk-".
func maySK(s string) bool {
	return anyIndex(s, "sk-", func(i int) bool {
		return wordStart(s, i) && countBytes(s[i+3:], isKeyByte, 20) >= 20
	})
}

// mayAWS: `\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b`.
func mayAWS(s string) bool {
	return anyIndex(s, "A", func(i int) bool {
		if !wordStart(s, i) || len(s) < i+20 {
			return false
		}
		switch s[i : i+4] {
		case "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA":
			return countBytes(s[i+4:], isUpperOrDigit, 16) == 16
		}
		return false
	})
}

// mayGitHub: `\b(?:gh[pousr]_...|github_pat_...)`.
func mayGitHub(s string) bool {
	return anyIndex(s, "gh", func(i int) bool {
		return wordStart(s, i) && len(s) >= i+4 && strings.IndexByte("pousr", s[i+2]) >= 0 && s[i+3] == '_'
	}) || anyIndex(s, "github_pat_", func(i int) bool { return wordStart(s, i) })
}

// maySlack: `\bxox[abposr]-`.
func maySlack(s string) bool {
	return anyIndex(s, "xox", func(i int) bool {
		return wordStart(s, i) && len(s) >= i+5 && strings.IndexByte("abposr", s[i+3]) >= 0 && s[i+4] == '-'
	})
}

// mayStripe: `\b(?:sk|rk)_(?:live|test)_`.
func mayStripe(s string) bool {
	at := func(i int) bool {
		return i >= 2 && (s[i-2:i] == "sk" || s[i-2:i] == "rk") && wordStart(s, i-2)
	}
	return anyIndex(s, "_live_", at) || anyIndex(s, "_test_", at)
}

// mayJWT: `\beyJ...\.eyJ...`.
func mayJWT(s string) bool {
	i := strings.Index(s, "eyJ")
	return i >= 0 && strings.Contains(s[i+3:], ".eyJ")
}

// mayBearer: `(?i)\b(?:bearer|basic)\s+[A-Za-z0-9._~+/\-]{12,}`; \s+ takes all the
// whitespace since the class has none.
func mayBearer(s string) bool {
	at := func(i int) bool {
		if !wordStart(s, i) {
			return false
		}
		n, ok := foldPrefix(s[i:], "bearer")
		if !ok {
			n, ok = foldPrefix(s[i:], "basic")
		}
		j := i + n
		if !ok || j >= len(s) || !isSpace(s[j]) {
			return false
		}
		for j < len(s) && isSpace(s[j]) {
			j++
		}
		count := 0
		for j < len(s) && count < 12 {
			switch {
			case s[j] < utf8.RuneSelf && isBearerByte(s[j]):
				j++
			case strings.HasPrefix(s[j:], "ſ"):
				j += len("ſ")
			case strings.HasPrefix(s[j:], "K"):
				j += len("K")
			default:
				return false
			}
			count++
		}
		return count >= 12
	}
	return anyIndex(s, "b", at) || anyIndex(s, "B", at)
}

// mayURLPassword: `://[^\s:/@]+:[^\s@/]+@`: after some "://", a ':' and then an '@' before
// any whitespace or '/'.
func mayURLPassword(s string) bool {
	return anyIndex(s, "://", func(i int) bool {
		colon := false
		for j := i + 3; j < len(s); j++ {
			switch c := s[j]; {
			case c == '@':
				return colon
			case c == '/' || isSpace(c):
				return false
			case c == ':':
				colon = true
			}
		}
		return false
	})
}

// assignmentKeys are the endings of the keyword alternatives of the assignment pattern:
// client_secret ends in secret, api_key, apikey, access_key, secret_access_key and
// private_key in key, access_key_id in keyid, key_id or key-id, auth_token, access_token
// and refresh_token in token.
var assignmentKeys = []string{"password", "passwd", "passphrase", "passcode", "pwd", "secret", "key", "keyid", "key_id", "key-id", "token"}

// mayAssignment: `(?i)...(?:password|...|token)\b["']?\s*[:=]`: before some ':' or '=',
// after whitespace and one quote, a keyword ends.
func mayAssignment(s string) bool {
	at := func(i int) bool {
		j := i
		for j > 0 && isSpace(s[j-1]) {
			j--
		}
		if j > 0 && (s[j-1] == '"' || s[j-1] == '\'') {
			j--
		}
		for _, kw := range assignmentKeys {
			if _, ok := foldSuffix(s[:j], kw); ok {
				return true
			}
		}
		return false
	}
	return anyIndex(s, ":", at) || anyIndex(s, "=", at)
}

// phraseKeys are the keyword alternatives of the natural-language pattern, as words
// separated by \s+.
var phraseKeys = [][]string{
	{"password"}, {"passwd"}, {"passphrase"}, {"passcode"}, {"pin"}, {"pin", "code"},
	{"api", "key"}, {"access", "token"}, {"secret", "key"}, {"security", "code"}, {"cvv"}, {"cvc"},
}

// mayPhrase: `(?i)(?:password|...|cvc)\s+(?:is|was|=|:)\s*:?\s+`: a keyword ends where
// whitespace starts, and after the whitespace come a verb and whitespace (maybe after a
// ':'). The keyword's words are separated by whitespace only, so skipping all whitespace
// backwards from the next word finds the end of the one before.
func mayPhrase(s string) bool {
	for i := 1; i < len(s); i++ {
		if !isSpace(s[i]) || isSpace(s[i-1]) {
			continue
		}
		if verbAfter(s[i:]) && phraseKeyBefore(s[:i]) {
			return true
		}
	}
	return false
}

// phraseKeyBefore reports whether s ends with one of phraseKeys.
func phraseKeyBefore(s string) bool {
next:
	for _, words := range phraseKeys {
		j := len(s)
		for w := len(words) - 1; w >= 0; w-- {
			if w < len(words)-1 {
				if j == 0 || !isSpace(s[j-1]) {
					continue next
				}
				for j > 0 && isSpace(s[j-1]) {
					j--
				}
			}
			n, ok := foldSuffix(s[:j], words[w])
			if !ok {
				continue next
			}
			j -= n
		}
		return true
	}
	return false
}

// verbAfter reports whether s starts with `\s+(?:is|was|=|:)\s*:?\s+`.
func verbAfter(s string) bool {
	j := 0
	for j < len(s) && isSpace(s[j]) {
		j++
	}
	if j == 0 || j == len(s) {
		return false
	}
	if s[j] == '=' || s[j] == ':' {
		j++
	} else if n, ok := foldPrefix(s[j:], "is"); ok {
		j += n
	} else if n, ok := foldPrefix(s[j:], "was"); ok {
		j += n
	} else {
		return false
	}
	// \s*:?\s+ needs whitespace right after the verb, or a ':' and then whitespace.
	if j < len(s) && isSpace(s[j]) {
		return true
	}
	return j+1 < len(s) && s[j] == ':' && isSpace(s[j+1])
}

// chineseLabels are the labels of the Chinese pattern (支付密码 and 登录密码 end in 密码).
var chineseLabels = []string{"密码", "口令", "密钥", "秘钥", "令牌", "验证码"}

// mayChineseLabel: `(?:密码|...)\s*(?:是|为|[:：=])`.
func mayChineseLabel(s string) bool {
	for _, label := range chineseLabels {
		found := anyIndex(s, label, func(i int) bool {
			j := i + len(label)
			for j < len(s) && isSpace(s[j]) {
				j++
			}
			rest := s[j:]
			return strings.HasPrefix(rest, "是") || strings.HasPrefix(rest, "为") ||
				strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, "：") || strings.HasPrefix(rest, "=")
		})
		if found {
			return true
		}
	}
	return false
}

// anyIndex reports whether at(i) holds for some index i of sub in s.
func anyIndex(s, sub string, at func(i int) bool) bool {
	for off := 0; ; {
		i := strings.Index(s[off:], sub)
		if i < 0 {
			return false
		}
		if at(off + i) {
			return true
		}
		off += i + 1
	}
}

// countBytes counts the leading bytes of s for which ok holds, up to limit.
func countBytes(s string, ok func(byte) bool, limit int) int {
	n := 0
	for n < len(s) && n < limit && ok(s[n]) {
		n++
	}
	return n
}

// foldPrefix reports whether s starts with kw (lower-case ASCII) as (?i)kw matches it, and
// how many bytes of s that takes.
func foldPrefix(s, kw string) (int, bool) {
	n := 0
	for i := 0; i < len(kw); i++ {
		switch {
		case n < len(s) && s[n] < utf8.RuneSelf:
			if lower(s[n]) != kw[i] {
				return 0, false
			}
			n++
		case kw[i] == 's' && strings.HasPrefix(s[n:], "ſ"):
			n += len("ſ")
		case kw[i] == 'k' && strings.HasPrefix(s[n:], "K"):
			n += len("K")
		default:
			return 0, false
		}
	}
	return n, true
}

// foldSuffix reports whether s ends with kw (lower-case ASCII) as (?i)kw matches it, and
// how many bytes of s that takes.
func foldSuffix(s, kw string) (int, bool) {
	n := len(s)
	for i := len(kw) - 1; i >= 0; i-- {
		switch {
		case n > 0 && s[n-1] < utf8.RuneSelf:
			if lower(s[n-1]) != kw[i] {
				return 0, false
			}
			n--
		case kw[i] == 's' && strings.HasSuffix(s[:n], "ſ"):
			n -= len("ſ")
		case kw[i] == 'k' && strings.HasSuffix(s[:n], "K"):
			n -= len("K")
		default:
			return 0, false
		}
	}
	return len(s) - n, true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// wordStart reports whether \b holds before s[i], an ASCII word character.
func wordStart(s string, i int) bool {
	return i == 0 || !isWordByte(s[i-1])
}

// isWordByte: \w, what \b looks at.
func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || isDigit(c) || c == '_'
}

// isSpace: \s.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isUpperOrDigit(c byte) bool { return 'A' <= c && c <= 'Z' || isDigit(c) }

// isKeyByte: [A-Za-z0-9_\-].
func isKeyByte(c byte) bool { return isWordByte(c) || c == '-' }

// isBearerByte: the ASCII part of [A-Za-z0-9._~+/\-].
func isBearerByte(c byte) bool {
	return isWordByte(c) || strings.IndexByte(".~+/-", c) >= 0
}
