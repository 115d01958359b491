package main

import (
	"slices"

	. "github.com/dave/jennifer/jen"
)

// registryPkg is the registry of linked schemas.
const registryPkg = "github.com/mkit-dev/mkitfdb/codec/registry"

// emitRegistry writes the init function that registers the package in
// the registry of linked schemas: its namespace and known format, its
// import path (taken from the package's own Tag type, so that it is right
// wherever the package is generated), its partition unions, key classes
// (with their value families) and records (with their formats), each with
// its generated parser or decoder. A second package of the same
// namespace makes the program fail at start.
func emitRegistry(f *File, s *schema) {
	f.ImportName(registryPkg, "registry")
	var partitions, keys, records []Code
	for _, d := range s.filter(func(d *decl) bool { return d.Kind == kindUnion && d.Partition }) {
		partitions = append(partitions, Values(Dict{
			Id("Name"):        Lit(d.Name),
			Id("Parse"):       Qual(registryPkg, "PartitionParser").Call(Id("Parse" + d.Name)),
			Id("ParsePrefix"): Qual(registryPkg, "PartitionPrefixParser").Call(Id("Parse" + d.Name + "Prefix")),
		}))
	}
	byTag := slices.Clone(s.keys())
	slices.SortStableFunc(byTag, func(a, b *decl) int { return int(a.Tag) - int(b.Tag) })
	for _, d := range byTag {
		kc := Dict{
			Id("Tag"):   Uint32().Call(Id("Tag" + d.Name)),
			Id("Name"):  Lit(d.Name),
			Id("Parse"): Qual(registryPkg, "KeyParser").Call(Id("Parse" + d.Name)),
		}
		if len(d.Family) > 0 {
			var names []Code
			for _, v := range d.Family {
				names = append(names, Lit(v.Name))
			}
			kc[Id("Values")] = Index().String().Values(names...)
			kc[Id("ValueVersion")] = Id("VersionOf" + d.Name + "Value")
		}
		keys = append(keys, Values(kc))
	}
	for _, d := range s.records() {
		records = append(records, Values(Dict{
			Id("Name"):    Lit(d.Name),
			Id("Version"): Id("Version" + d.Name),
			Id("Format"):  Id("Format" + d.Name),
			Id("Decode"):  Qual(registryPkg, "Decoder").Call(Id("Decode" + d.Name)),
		}))
	}
	fields := Dict{
		Id("Namespace"):  Id("SchemaNamespace"),
		Id("Format"):     Id("SchemaFormat"),
		Id("ImportPath"): Qual("reflect", "TypeFor").Types(Id("Tag")).Call().Dot("PkgPath").Call(),
	}
	if len(partitions) > 0 {
		fields[Id("Partitions")] = Index().Qual(registryPkg, "PartitionUnion").Values(partitions...)
	}
	if len(keys) > 0 {
		fields[Id("Keys")] = Index().Qual(registryPkg, "KeyClass").Values(keys...)
	}
	if len(records) > 0 {
		fields[Id("Records")] = Index().Qual(registryPkg, "Record").Values(records...)
	}
	f.Comment("init registers the package in the registry of the schemas linked into the")
	f.Comment("program (package registry); a second package of namespace SchemaNamespace")
	f.Comment("makes the program fail at start, naming both import paths.")
	f.Func().Id("init").Params().Block(
		Qual(registryPkg, "Register").Call(Qual(registryPkg, "Schema").Values(fields)),
	)
}
