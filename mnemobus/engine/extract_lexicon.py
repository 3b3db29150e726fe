"""Word lists the parser extractor reads clauses with: kin, pets, jobs, conditions, and what each NER label is.

Data, no logic: the parser finds the clause, these say what kind of thing a word names.
"""

from __future__ import annotations

from mnemobus.engine.relations import USES_KINDS

# "my sister Anna" -> Anna sister_of speaker; the relation is the role, said the way people say it
KIN = {
    "sister": "sister", "brother": "brother", "mother": "mother", "mum": "mother", "mom": "mother",
    "mommy": "mother", "mummy": "mother", "father": "father", "dad": "father", "daddy": "father",
    "parents": "parent", "parent": "parent", "son": "son", "daughter": "daughter", "kid": "child", "kids": "child",
    "child": "child", "children": "child", "wife": "wife", "husband": "husband", "partner": "partner",
    "girlfriend": "girlfriend", "boyfriend": "boyfriend", "fiance": "fiance", "fiancé": "fiance",
    "fiancee": "fiance", "fiancée": "fiance", "spouse": "spouse", "cousin": "cousin", "aunt": "aunt",
    "uncle": "uncle", "niece": "niece", "nephew": "nephew", "grandmother": "grandmother", "grandma": "grandmother",
    "granny": "grandmother", "nan": "grandmother", "grandfather": "grandfather", "grandpa": "grandfather",
    "grandparents": "grandparent", "grandson": "grandson", "granddaughter": "granddaughter",
    "stepmother": "stepmother", "stepfather": "stepfather", "stepson": "stepson", "stepdaughter": "stepdaughter",
    "friend": "friend", "bestie": "friend", "roommate": "roommate", "flatmate": "roommate", "housemate": "roommate",
    "neighbour": "neighbour", "neighbor": "neighbour", "colleague": "colleague", "coworker": "colleague",
    "co-worker": "colleague", "boss": "manager", "manager": "manager", "supervisor": "manager",
    "mentor": "mentor", "therapist": "therapist", "doctor": "doctor", "dentist": "dentist", "coach": "coach",
    "teacher": "teacher", "tutor": "tutor", "landlord": "landlord", "ex": "ex", "twin": "twin",
}
# "team lead", "best friend": the head noun and the words before it that make the role
KIN_PHRASES = {("team", "lead"): "manager", ("other", "half"): "partner", ("better", "half"): "partner", ("team", "leader"): "manager", ("line", "manager"): "manager",
               ("best", "friend"): "friend", ("little", "brother"): "brother", ("big", "sister"): "sister",
               ("older", "brother"): "brother", ("younger", "sister"): "sister", ("little", "sister"): "sister",
               ("big", "brother"): "brother", ("older", "sister"): "sister", ("younger", "brother"): "brother",
               ("eldest", "son"): "son", ("eldest", "daughter"): "daughter", ("youngest", "son"): "son",
               ("youngest", "daughter"): "daughter", ("baby", "brother"): "brother", ("baby", "sister"): "sister"}

PETS = frozenset("""dog dogs puppy puppies cat cats kitten kittens parrot parrots budgie hamster hamsters rabbit rabbits
bunny guinea pig pigs tortoise turtle horse horses pony goldfish fish snake lizard gecko ferret chinchilla rat rats
mouse mice chicken chickens hen hens greyhound labrador retriever terrier spaniel poodle collie beagle pug dachshund
husky corgi bulldog shepherd cockatiel canary iguana axolotl""".split())

JOBS = frozenset("""accountant actor actress architect artist baker barista barber bartender biologist builder butcher
carpenter cashier chef chemist cleaner coach consultant cook counsellor counselor dancer dentist designer developer
doctor driver economist editor electrician engineer farmer firefighter fisherman gardener hairdresser historian
illustrator instructor interpreter janitor journalist judge labourer laborer lawyer lecturer librarian lifeguard
mechanic midwife miner musician nanny nurse optician painter paralegal paramedic pharmacist photographer physician
physicist physiotherapist pilot plumber poet policeman policewoman politician postman professor programmer
psychologist receptionist reporter researcher salesman saleswoman scientist secretary singer soldier solicitor
student surgeon tailor teacher technician therapist translator tutor vet veterinarian waiter waitress welder writer
analyst manager director founder ceo cto cfo intern apprentice administrator assistant clerk coordinator officer
specialist strategist recruiter marketer copywriter podcaster streamer youtuber entrepreneur freelancer
contractor carer caregiver dietitian nutritionist optometrist radiographer sonographer surveyor vicar priest rabbi
imam pastor monk nun sailor captain ranger guard detective investigator inspector auditor banker broker trader
cartographer animator sculptor composer conductor drummer guitarist pianist violinist cellist dj producer
retiree housewife homemaker""".split())

CONDITIONS = frozenset("""asthma diabetes arthritis migraines migraine eczema psoriasis epilepsy anxiety depression
adhd autism dyslexia insomnia hypertension cancer covid flu cold allergy allergies hay fever coeliac celiac
tinnitus sciatica gout lupus crohn's ibs anaemia anemia endometriosis pcos""".split())

# adjectives that describe a lasting state of a person (not a mood): "I'm vegan" is a fact, "I'm tired" is not
STATES = frozenset("""vegan vegetarian pescatarian pregnant retired single married divorced engaged widowed diabetic
coeliac celiac deaf blind colourblind colorblind left-handed right-handed lactose intolerant gluten-free sober
teetotal unemployed self-employed bilingual trilingual introverted extroverted autistic dyslexic""".split()) - {
    "lactose", "intolerant"} | {"lactose intolerant", "gluten intolerant", "dairy intolerant", "wheat intolerant"}

# "X is my favourite Y", "allergic to", "afraid of": adjective + preposition -> relation
ADJ_RELATIONS = {("allergic", "to"): "allergic_to", ("afraid", "of"): "afraid_of", ("scared", "of"): "afraid_of",
                 ("terrified", "of"): "afraid_of", ("married", "to"): "is_married_to", ("engaged", "to"): "engaged_to",
                 ("interested", "in"): "interested_in", ("obsessed", "with"): "likes", ("addicted", "to"): "likes",
                 ("fond", "of"): "likes", ("keen", "on"): "likes", ("crazy", "about"): "likes",
                 ("passionate", "about"): "likes", ("intolerant", "to"): "intolerant_to", ("from", ""): "from",
                 ("based", "in"): "lives_in"}

# places a person works "at" without an employer: "I work at home", "at night", "at weekends"
NOT_WORKPLACES = frozenset("""home night nights weekend weekends moment times time lunch lunchtime noon midnight
dawn desk computer office least most all same bit start end beginning""".split())
# common nouns that name a workplace: "I work at a hospital" is a job; "at the weekend" is not
WORKPLACES = frozenset("""company startup start-up firm bank hospital clinic school university college academy
bakery shop store supermarket cafe café restaurant bar pub hotel agency lab laboratory factory plant warehouse
library museum gallery charity nonprofit studio newspaper magazine council ministry department airline airport
station garage salon gym pharmacy practice surgery nursery kindergarten church theatre theater cinema office
consultancy brewery winery farm mine port bookshop bookstore hostel clinic centre center""".split())

# things a person says they own ("I drive a Toyota", "we bought a house")
OWNABLE_HEADS = frozenset("""car house flat apartment bike bicycle motorbike motorcycle boat van truck caravan
camper laptop phone iphone kindle piano guitar tesla""".split())

# words that are not names of anything worth a node of its own
NOT_THINGS = frozenset("""it this that these those thing things something anything everything nothing stuff lot lots
one ones way time times day days bit kind sort type part rest place way idea deal what which who whom whatever
fun sense point more longer anymore""".split())

# adjectives that say how the speaker feels about a thing, not what it is: dropped from the thing's name
EVALUATIVE = frozenset("""small big large huge tiny little new old nice great good lovely amazing awesome cute
beautiful wonderful fantastic terrible awful bad best worst favourite favorite real own local first second last
whole entire same other few many several certain particular main fine brilliant incredible gorgeous proper
rescue lucky happy proud busy blessed grateful strong tough different better changed true""".split())

NER_TYPES = {"PERSON": "person", "GPE": "place", "LOC": "place", "FAC": "place", "ORG": "organization",
             "PRODUCT": "product", "EVENT": "event", "WORK_OF_ART": "product", "NORP": "concept",
             "LANGUAGE": "concept", "DATE": "date", "LAW": "concept"}

LIKE_VERBS = {"like": "likes", "love": "likes", "enjoy": "likes", "adore": "likes", "prefer": "prefers",
              "hate": "dislikes", "dislike": "dislikes", "detest": "dislikes", "loathe": "dislikes"}

#: what one goes to as an occasion, not a place: "I'm going to a conference", "going to a concert on Friday"
EVENT_NOUNS = frozenset("""conference concert festival fest gig show class lesson workshop seminar course party wedding
funeral meeting meetup retreat camp game match race marathon tournament competition comp parade rally fair exhibition
expo convention ceremony graduation reunion event session webinar lecture screening premiere recital audition
interview appointment performance play musical opera ballet exam hearing rehearsal practice picnic trip vacation holiday
getaway barbecue bbq cookout potluck sleepover hike excursion tour cruise""".split())

# who someone says they are ("I'm a single parent", "I'm a transgender woman"): kept as an "is" fact about the speaker
IDENTITIES = frozenset("""father mother mum mom dad grandmother grandfather grandparent parent woman man student
introvert extrovert veteran immigrant vegan vegetarian christian muslim jew buddhist atheist twin newlywed
retiree""".split())

# "X is so important (to me)": the speaker holds X dear
VALUE_WORDS = frozenset("important vital essential precious priceless sacred".split())

# time words that are never a name beside a noun ("my son Tom visits most Thursdays")
TIME_WORDS = frozenset("""monday tuesday wednesday thursday friday saturday sunday weekend morning evening night
year month week day summer winter spring autumn january february march april may june july august september october november december today tomorrow
yesterday""".split())

# "I'm at PwC now": words that make "at" where someone is these days, not where they are this minute
PRESENT_WORDS = frozenset({"now", "nowadays", "days", "currently", "still"})  # "still" goes on holding now

# what someone is "on" when it is a medicine: the common international nonproprietary name stems, and words for one
MEDICINE_STEMS = ("pine", "olol", "pril", "sartan", "statin", "statins", "formin", "prazole", "cillin", "mycin",
                  "cycline", "floxacin", "azole", "oxetine", "aline", "pam", "lam", "done", "sone", "solone",
                  "thyroxine", "mab", "tide", "gliptin", "gliflozin", "parin", "xaban", "triptan", "setron", "tidine",
                  "profen", "fenac", "codeine", "morphine", "lithium", "insulin", "opram", "afaxine", "azepine",
                  "etamol")
MEDICINE_WORDS = frozenset("""medication medications medicine meds pills tablets antidepressants antibiotics
steroids insulin hrt chemo chemotherapy methadone inhaler warfarin aspirin paracetamol ibuprofen""".split())

# past forms the tagger reads as a bare verb when a sentence opens with one ("Got a new job at X")
PAST_FORMS = frozenset("got went began took left had made came found bought sold met moved started joined".split())

# the verb table the parser's generic matcher runs (_Reader.rows): (verb lemma, particle or None, slot: "dobj" or
# the prepositions that bring the object, relation, object type or None, check or None: "place" a place someone can
# live in, "employer" a workplace, "named" a name). Verbs whose reading needs more than a row (work, join, have,
# take, run, go, visit, be) keep their own branch in _Reader.relations.
VERB_ROWS: tuple[tuple[str, str | None, str, str, str | None, str | None], ...] = (
    ("live", None, "in at near", "lives_in", "place", "place"),
    ("live", None, "with", "lives_with", "person", None),
    ("reside", None, "in at near", "lives_in", "place", "place"),
    ("base", None, "in", "lives_in", "place", "place"),
    ("move", None, "to into", "lives_in", "place", "place"),
    ("relocate", None, "to into", "lives_in", "place", "place"),
    ("grow", "up", "in", "grew_up_in", "place", None),
    ("teach", None, "dobj", "teaches", None, None),
    ("teach", None, "at", "works_at", "organization", "employer"),
    ("coach", None, "dobj", "coaches", None, None),
    ("coach", None, "at", "works_at", "organization", "employer"),
    ("study", None, "dobj", "studies", None, None),
    ("study", None, "at", "studies_at", "organization", None),
    ("speak", None, "dobj", "speaks", None, None),
    ("collect", None, "dobj", "collects", None, None),
    ("support", None, "dobj", "supports", None, None),
    ("train", None, "for", "training_for", None, None),
    ("play", None, "dobj", "plays", None, None),
    ("play", None, "in for", "member_of", "organization", "named"),
    ("drink", None, "dobj", "drinks", None, None),
    ("eat", None, "dobj", "eats", None, None),
    ("smoke", None, "dobj", "smokes", None, None),
    ("use", None, "dobj", "uses", None, None),
    ("switch", None, "to", "uses", None, None),
    ("attend", None, "dobj", "attends", None, None),
    ("volunteer", None, "at for with", "volunteers_at", "organization", None),
    ("diagnose", None, "with", "has_condition", "condition", None),
    ("suffer", None, "from", "has_condition", "condition", None),
    ("employ", None, "by", "works_at", "organization", None),
    ("marry", None, "dobj", "is_married_to", "person", None),
    ("marry", None, "to", "is_married_to", "person", None),
    ("engage", None, "to", "engaged_to", "person", None),
    ("cycle", None, "to", "cycles_to", None, None),
    ("learn", None, "dobj", "learning", None, None),
)

# what someone else does to the speaker that the speaker then holds: "the doctor put me on metformin", "they
# started me on insulin", "my GP switched me to citalopram": (verb lemma, preposition) -> the speaker's relation
DONE_TO_ME = {("put", "on"): "takes", ("start", "on"): "takes", ("switch", "to"): "takes", ("switch", "onto"): "takes",
              ("move", "onto"): "takes"}

# courses someone starts, does or finishes: "I'm starting a master's next year", "doing a PhD"
DEGREES = frozenset("""master masters phd doctorate degree mba bachelor bachelors diploma apprenticeship course
msc ma ba bsc llm pgce""".split())

# what two people do together, said as "Sam and I ...": the relation it gives the speaker toward the other
TOGETHER = {"marry": "is_married_to", "engage": "engaged_to", "date": "partner_of", "together": "partner_of",
            "married": "is_married_to", "engaged": "engaged_to"}

# "my phone number is ...", "my email is ...": the noun that names a contact detail, and its relation
CONTACTS = {"number": "phone", "mobile": "phone", "phone": "phone", "email": "email", "e-mail": "email"}

# "my employer is Aviva", "my phone's a Samsung": a thing of the speaker's named by a copula, and its relation
MY_THINGS = {"employer": "works_at", "workplace": "works_at", "company": "works_at", "job": "works_as",
             "occupation": "works_as", "profession": "works_as", "phone": "uses_phone", "car": "owns_car",
             "diet": "diet", **{noun: f"uses_{kind}" for kind, (nouns, _) in USES_KINDS.items() for noun in nouns}}

# the parser's lemma mistakes on verbs (en_core_web_sm: "hated" -> "hat", "rides" -> "rid", "swam" -> "swam"),
# found by lemmatising verb forms in short sentences: word form -> the lemma, set on verbs only ("a hat" stays)
LEMMA_FIXES = {"hated": "hate", "hates": "hate", "hating": "hate", "rides": "ride", "riding": "ride",
               "swam": "swim", "dove": "dive", "forgot": "forget", "wove": "weave", "axed": "axe"}

# the first words of a sentence said with its "I'm" dropped: "No longer vegetarian.", "Still at Arup.", "Not
# vegan any more.", "At Deloitte now.", "Off the statins." (engine/extract_parse.fragment)
FRAGMENT_OPENERS = frozenset("no not still now at in off back".split())
