"""The built-in keyword tables of the rule classifier.

Entries are lower case. A one-word entry matches as a substring, so stems
("optimiz", "analy") stand for a whole word family and count once; a
multi-word entry matches word by word (see ``keywords.py``). Two rules keep
the counts honest, and a test holds the tables to them:

- within a category no one-word entry is a substring of another entry, so
  the same words of a text never count as two distinct keywords;
- ``code`` needs two distinct entries, so programming languages are not
  entries (``Translate this Python function to Rust.`` has one code marker,
  ``function``), nor are words that hide inside everyday ones ("script" in
  "manuscript", "class" in "classic", "api" in "capital").

The English table is the base every language inherits. It also carries the
Japanese and Chinese translation verbs, so a translation request in those
languages is found whatever the table.

The proof phrases are not tables users extend: they only decide whether a
proof expression asks *for* a proof or *about* one (``proof.py``).
"""

from __future__ import annotations

from types import MappingProxyType

EN = MappingProxyType({
    "complex": (
        "architecture", "distributed", "concurren", "scalab", "optimiz", "trade-off", "tradeoff",
        "complexity", "theorem", "rigorous", "in depth", "in-depth", "comprehensive", "step by step",
        "step-by-step", "deriv", "formal", "asymptotic", "consensus", "byzantine", "fault-toleran",
        "fault tolerance", "fault tolerant", "system design", "design a system", "research",
        "state of the art", "state-of-the-art", "edge case", "edge cases", "nuanc", "thorough",
        "sophisticat", "mathematical", "quantum", "cryptograph", "throughput", "latency", "invariant",
        "convergen", "stochastic", "differential equation", "eigen", "topolog", "multi-step",
        "microservice", "implications", "first principles",
    ),
    "simple": (
        "hello", "hey there", "thanks", "thank you", "what is", "what's", "what\u2019s", "who is",
        "who was", "when is", "when was", "where is", "how are you", "good morning", "good evening",
        "good night", "quick question", "briefly", "in one sentence", "in one word", "yes or no",
        "definition of", "meaning of", "how do you spell",
    ),
    "creative": (
        "poem", "poetry", "haiku", "sonnet", "limerick", "lyrics", "song", "write a story",
        "tell me a story", "fairy tale", "fable", "once upon", "fiction", "screenplay", "rhyme",
        "creative writing", "write a novel", "slogan", "tagline", "joke", "imagine a world",
        "character named", "plot twist", "fantasy",
    ),
    "analysis": (
        "analy", "compar", "evaluat", "assess", "pros and cons", "summar", "critique", "review",
        "examine", "investigat", "interpretation", "interpret the", "break down", "breakdown",
        "insight", "trend", "root cause", "correlat", "statistic", "strengths and weaknesses",
        "differences between", "explain why",
    ),
    "code": (
        "function", "code", "coding", "programming", "implement", "refactor", "bug", "compile", "algorithm", "regex",
        "query", "undefined", "traceback", "syntax", "backend", "frontend", "library", "deploy", "quicksort",
        "binary search", "linked list", "hash table", "hash map",
        "endpoint", "sql", "database", "unit test", "unit tests", "stack trace", "exception handling",
        "write a script", "rest api", "graphql", "json", "http", "repository",
        "github", "docker", "kubernetes", "segfault", "runtime error", "null pointer",
        "memory leak", "race condition", "deadlock", "pull request", "recursion", "recursive",
        "rate limiting", "rate limiter",
    ),
    "translation": (
        "translat", "into english", "into korean", "into japanese", "into chinese", "into french",
        "into spanish", "into german", "how do you say",
        "\u7ffb\u8a33", "\u7ffb\u8bd1", "\u7ffb\u8b6f", "\u8a33\u3057\u3066", "\u8bd1\u6210", "\u8b6f\u6210",
    ),
    "proof": ("proof", "prove", "show that", "demonstrate that", "lemma", "q.e.d", "qed"),
})

KO = MappingProxyType({
    "complex": (
        "아키텍처", "분산", "최적화", "동시성", "확장성", "트레이드오프", "복잡도", "엄밀", "심층",
        "단계별", "유도", "형식적", "점근", "비잔틴", "합의 프로토콜", "합의 알고리즘", "내결함성",
        "장애 허용", "연구", "수학적", "양자", "암호", "처리량", "지연 시간", "불변식", "수렴",
        "확률적", "미분 방정식", "고유값", "위상", "마이크로서비스", "설계",
    ),
    "simple": (
        "안녕", "고마워", "고맙", "감사합니다", "감사해요", "뭐야", "뭐예요", "뭔가요", "무엇인가요",
        "누구야", "누구예요", "간단히", "간단하게", "짧게", "한 줄로", "한 마디로", "몇 시",
    ),
    "creative": (
        "시를 써", "시를 지어", "시 한 편", "소설", "동화", "가사", "노래", "이야기를 써",
        "이야기를 지어", "옛날 옛적", "하이쿠", "수필", "창작", "농담", "슬로건", "광고 문구",
        "판타지", "운율", "시조",
    ),
    "analysis": (
        "분석", "요약", "비교", "평가", "검토", "장단점", "해석", "원인", "추세", "통계", "인사이트",
        "차이점", "리뷰", "진단", "비판", "고찰", "시사점", "상관관계",
    ),
    "code": (
        "구현", "코드", "함수", "리팩터", "리팩토링", "디버깅", "컴파일", "알고리즘", "버그", "로직",
        "엔드포인트", "쿼리", "정규식", "데이터베이스", "프로그래밍", "스택 트레이스", "단위 테스트",
        "예외 처리", "메모리 누수", "프로그램", "에러", "오류", "라이브러리", "퀵소트", "이진 탐색", "연결 리스트",
        "해시 테이블",
    ),
    "translation": ("번역", "통역", "의역", "직역", "영어로 옮겨", "한국어로 옮겨", "영어로 바꿔", "한국어로 바꿔"),
    "proof": ("증명",),
})

BUILTIN = MappingProxyType({"en": EN, "ko": KO})
BASE_LANGUAGE = "en"

# A request for a proof, and a question about one (English and Korean, whatever the table).
PROOF_REQUESTS = (
    "prove that", "prove the", "prove this", "prove it", "prove by", "give a proof", "write a proof",
    "provide a proof", "construct a proof", "show that", "demonstrate that",
    "증명하라", "증명해", "증명하시오", "증명하세요", "증명을 해", "증명을 보여", "증명을 써", "증명을 작성",
    "보여라", "보이시오", "보이라",
)
PROOF_QUESTIONS = (
    "what is a proof", "what is the proof", "explain the proof", "explain this proof", "why does this proof",
    "why does the proof", "how does the proof", "how does this proof", "what does the proof", "is this proof",
    "is my proof", "check my proof", "check this proof",
    "증명이란", "증명이 뭐", "증명은 뭐", "증명을 설명", "증명이 왜", "증명이 맞", "증명의 의미", "증명 방법이 뭐",
)

# Latin function words: a marker that starts and ends with one matches only as adjacent words.
FUNCTION_WORDS = frozenset({
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "being", "am", "what", "which", "who", "whom",
    "whose", "when", "where", "why", "how", "once", "upon", "of", "to", "in", "on", "at", "by", "for", "with",
    "from", "into", "onto", "as", "and", "or", "but", "nor", "it", "its", "this", "that", "these", "those", "do",
    "does", "did", "can", "could", "will", "would", "shall", "should", "may", "might", "must", "i", "you", "he",
    "she", "we", "they", "me", "my", "your", "his", "her", "our", "their", "there", "here", "not", "no", "so", "if",
    "then", "than", "about",
})
