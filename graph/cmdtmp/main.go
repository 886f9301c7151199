package main
import ("fmt";"github.com/sluice-dev/sluice";"github.com/sluice-dev/sluice/graph";"github.com/sluice-dev/sluice/internal/schema")
func main(){
 s, err := schema.Parse(`
"A person."
type Person { name: String! age: Int friends: [Person!] home: Address favorite: Color ssn: String @private salary: Int @protected(role: "write") tags: [String] }
type Address @subdocument { street: String city: String }
enum Color { RED GREEN }
interface Animal { name: String! }
type Dog implements Animal { breed: String owner: Person }
interface Pet @concrete { name: String! }
interface Puppy implements Pet @concrete { age: Int }
type Cat implements Pet & Animal { indoor: Boolean }
`)
 if err != nil { panic(err) }
 _, err = graph.BuildSchema(s, sluice.RoleRead)
 fmt.Println(err)
}
