"""Everyday English words that are also common identifiers.

A question written in prose ("select the version of the statement") uses
these words as English; only its phrasing (backticks, ``name()``, a dotted
or role-qualified form, CamelCase, snake_case) says when one of them means
the symbol of that name.  The list is deliberately limited to words a
sentence about code uses as plain words; project-specific vocabulary
(``sympify``, ``mysql``, ``autoescape``) is never on it.
"""

from __future__ import annotations

ENGLISH = frozenset(
    """
    able about above accept access account act action active actual add address adjust advance after again against
    age agent aggregate alias align all allocate allow alter always amount analyze and annotate answer any append
    apply archive area argument arithmetic around array arrive as ask assert assign async attach attempt attribute
    author auto available avoid await away back background backend bad balance bar base basic batch be become before
    begin behavior behaviour being below best between big bind binary bit blank block body bool boolean both bottom
    bound boundary box branch break bridge broken browser buffer build builder built bundle button by byte cache
    calculate call callback can cancel capture card care carry case cast catch cause cell center chain change channel
    char character check child choice choose chunk class clean clear click client clone close closed code collect
    collection color column combine command comment commit common compare compile complete complex component compose
    compute concat condition config configure connect connection console constant construct consume contain content
    context continue control convert copy core correct cost count counter cover create current cursor custom cut
    cycle data date day debug decimal declare decode default defer define definition delay delete depth describe
    description design destroy detach detail detect device dialog diff digest dimension direct direction directory
    disable discard display dispatch distance divide do document domain done double down draft draw drive driver drop
    dump duration each early edge edit effect element else emit empty enable encode end engine enter entity entry
    environment equal error escape evaluate even event every exact example except exception exchange execute exist
    exit expand expect expire explain export expose expression extend extension extra extract face fact factor fail
    failure fall false fast feature fetch field file fill filter final find finish first fix flag flat float flow
    flush fold follow font for force fork form format forward frame free fresh from front full function future gap
    gather general generate get give global go good graph group guard guess handle handler hash have head header
    health height help hidden hide high history hit hold home hook host hour id identity idle if ignore image
    implement import in include increase index info inherit init initial inline inner input insert inside inspect
    install instance integer interface internal interval into invalid invoke is issue item iterate job join jump just
    keep key kill kind label language large last later launch layer layout lazy leaf left length less level library
    life lift light like limit line link list listen literal load local lock log logger long look loop low main make
    manage manager map mark marker match max maximum measure member memory merge message meta method middle min
    minimum minute mirror miss mixed mode model modify module moment month more move multiple must name native
    navigate need negative nest network never new next node none normal normalize not note nothing notify now null
    number object observe offset old on once one only open operation operator option optional or order other out
    outer output over override owner pack package pad page pair panel parallel param parameter parent parse part
    partial pass patch path pattern pause peek pending permission persist pick piece pipe place plain plan platform
    play plugin point pointer policy poll pool pop port position post power prefix prepare present press prevent
    preview previous primary print priority private probe process produce product profile program progress project
    promise prompt property protocol provide provider proxy public publish pull push put query queue quick quit quote
    raise random range rate raw reach read ready real reason receive record recover reduce ref refer reference refresh
    region register regular reject relation release reload remote remove rename render repeat replace reply report
    request require reserve reset resize resolve resource response rest restore result resume retry return reverse
    review rewrite right role root round route row rule run safe sample save scale scan schedule schema scope score
    screen script scroll search second section secure security seed seek select selection self send sequence serial
    serialize series serve server service session set setting setup shape share shell shift short show shutdown side
    sign signal simple single size skip sleep slice slot small snapshot socket sort source space span spawn special
    spec split stack stage standard start state statement static status step stop storage store stream strict string
    strip structure style submit subscribe success suffix sum summary support suspend swap switch symbol sync system
    table tag tail take target task template temporary term test text thread through throw tick time timeout timer
    title to toggle token tool top total touch trace track transaction transform translate transport tree trigger trim
    true try tune turn type unique unit unknown unless unlock unpack until up update upgrade upload upper usage use
    user valid validate value variable version view visit visible wait walk want warn warning watch weight when where
    while width window with word work worker wrap write year yield zero zone
    """.split()
)
